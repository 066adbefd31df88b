"""The explorer's pages over HTTP (no browser): what a client with JavaScript off gets."""

from __future__ import annotations

import base64
import html

import httpx

from tests.services.explorer.conftest import Stack


def get(stack: Stack, path: str, **params) -> httpx.Response:
    return httpx.get(stack.explorer.url + path, params=params, timeout=30, follow_redirects=True)


def test_wallet_attest_gave_the_hash_that_is_registered_on_chain(stack):
    record = stack.node.reader().query("OperatorStake", "Operators", [stack.address]).value
    assert record["attestation_hash"] == stack.report_hash
    report = httpx.get(f"{stack.attestation.url}/v1/reports/{stack.report_hash}").json()["report"]
    assert report["operator_id"] == stack.operator and report["account"] == stack.address


def test_report_page_decodes_verifies_and_anchors(stack):
    page = get(stack, f"/reports/{stack.report_hash}")
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert 'id="mock-badge"' in text and "VALID" in text and "INVALID" not in text
    for label in ("tee_type", "qe_vendor_id", "mr_td", "rtmr3", "report_data", "measres",
                  "x-nvidia-gpu-attestation-report-nonce-match", "binding.report_data"):
        assert label in text, label
    report = httpx.get(f"{stack.attestation.url}/v1/reports/{stack.report_hash}").json()["report"]
    assert f'id="signature">{report["signature"]}<' in text
    # The anchor: this operator's account with its stake, read from OperatorStake storage.
    anchor = text[text.index('id="anchor"'):]
    assert stack.address in anchor and f"{stack.stake} plancks" in anchor


def test_raw_bytes_download_as_issued(stack):
    report = httpx.get(f"{stack.attestation.url}/v1/reports/{stack.report_hash}").json()["report"]
    quote = get(stack, f"/reports/{stack.report_hash}/quote.bin")
    assert quote.content == base64.b64decode(report["quote"])
    assert "attachment" in quote.headers["content-disposition"]
    evidence = get(stack, f"/reports/{stack.report_hash}/gpu/0/evidence.bin")
    assert evidence.content == base64.b64decode(report["gpu_evidence"][0]["evidence"])
    pem = get(stack, f"/reports/{stack.report_hash}/gpu/0/certificate.pem")
    assert pem.content == base64.b64decode(report["gpu_evidence"][0]["certificate"])
    assert get(stack, f"/reports/{stack.report_hash}/report.json").json() == report
    assert get(stack, f"/reports/{stack.report_hash}/gpu/9/evidence.bin").status_code == 404


def test_search_by_hash_account_and_operator(stack):
    by_hash = get(stack, "/", q=stack.report_hash.upper().replace("0X", "0x"))
    assert by_hash.history and by_hash.history[0].status_code == 303
    assert str(by_hash.url).endswith(f"/reports/{stack.report_hash}")
    by_account = get(stack, "/", q=stack.address)
    assert by_account.status_code == 200 and stack.report_hash in by_account.text
    by_operator = get(stack, "/", q=stack.operator)
    assert stack.report_hash in by_operator.text
    nobody = get(stack, "/", q="nobody-here")
    assert nobody.status_code == 200 and 'id="no-reports"' in nobody.text


def test_operator_page_shows_reports_and_registration(stack):
    page = get(stack, f"/operators/{stack.operator}")
    text = page.text
    assert page.status_code == 200 and stack.report_hash in text
    table = text[text.index('id="registrations"'):]
    assert stack.address in table and f"{stack.stake} plancks" in table


def test_pages_of_the_list_are_stable(stack):
    extra = [httpx.post(f"{stack.attestation.url}/v1/attest",
                        json={"operator_id": "pager"}).json()["hash"] for _ in range(4)]
    first = get(stack, "/", q="pager")
    assert [h for h in extra[::-1][:3] if h in first.text] == extra[::-1][:3]
    older = first.text.split('id="older" href="')[1].split('"')[0]
    second = get(stack, html.unescape(older).split("?")[0],
                 **dict(p.split("=") for p in html.unescape(older).split("?")[1].split("&")))
    assert extra[0] in second.text and extra[3] not in second.text


def test_unknown_hash_is_a_404_page(stack):
    page = get(stack, "/reports/0x" + "cd" * 32)
    assert page.status_code == 404 and "No such report" in page.text
    search = get(stack, "/", q="0x" + "cd" * 32)
    assert search.status_code == 404 and "No such report" in search.text


def test_bad_input_is_a_400_page(stack):
    for path, params in (("/reports/0x12", {}), ("/", {"q": "0xnothex"}),
                         ("/", {"q": "x" * 200}), ("/", {"cursor": "not-a-cursor"})):
        page = get(stack, path, **params)
        assert page.status_code == 400, (path, params, page.status_code)
        assert 'id="error-title"' in page.text
    assert get(stack, "/no/such/page").status_code == 404


def test_a_report_of_an_earlier_network_is_marked(stack):
    import datetime as dt
    import os

    from ops_tools.services.attestation.pki import MockPki
    from ops_tools.services.attestation.report import IssueRequest, issue
    from ops_tools.services.attestation.store import ReportStore
    from ops_tools.services.common.db import Database

    # As the service's database holds it after a reset: a report issued on the old genesis.
    old = issue(MockPki(b"explorer-test-seed-0f1e2d3c4b5a6978"), IssueRequest(
        "old-net-op", None, os.urandom(32), "0x" + "99" * 32, dt.datetime.now(dt.UTC),
        dt.timedelta(days=1)))
    db = Database(f"sqlite:///{stack.workdir / 'attestation' / 'state' / 'attestation.db'}")
    ReportStore(db).add(old)
    db.dispose()
    listing = get(stack, "/", q="old-net-op").text
    assert "earlier network" in listing and old["hash"] in listing
    page = get(stack, f"/reports/{old['hash']}").text
    assert 'id="earlier-badge"' in page and "INVALID" in page
    checks = page[page.index('id="checks"'):page.index('id="anchor-none"')]
    assert "network" in checks and "an earlier network" in checks
