"""The attestation service over HTTP, on SQLite and PostgreSQL, against a real devnode."""

from __future__ import annotations

import copy
import os

import pytest

from tests.wallet.devnode_fixture import rpc_call

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def attest(client, **body):
    return client.post("/v1/attest", json=body)


def test_issue_fetch_list_verify_and_survive_a_restart(make_client, database_url, devnode):
    client = make_client(database_url)
    assert client.get("/ready").status_code == 200
    nonce = "0x" + os.urandom(32).hex()
    resp = attest(client, operator_id="alice-op", account=ALICE, nonce=nonce)
    assert resp.status_code == 201, resp.text
    report = resp.json()
    assert report["mock"] is True and report["nonce"] == nonce and report["account"] == ALICE
    assert report["genesis_hash"] == rpc_call(devnode.http_url, "chain_getBlockHash", [0])
    assert report["hash"].startswith("0x") and len(report["hash"]) == 66
    generated = attest(client, operator_id="alice-op").json()
    assert len(bytes.fromhex(generated["nonce"][2:])) == 32 and generated["account"] is None

    got = client.get(f"/v1/reports/{report['hash']}").json()
    assert got["report"] == report and got["network"]["earlier"] is False
    listing = client.get("/v1/reports").json()
    assert [r["hash"] for r in listing["reports"]] == [generated["hash"], report["hash"]]
    verdict = client.post("/v1/verify", json=report).json()
    assert verdict["valid"] is True, verdict

    roots = client.get("/v1/roots").json()
    restarted = make_client(database_url)
    assert restarted.get(f"/v1/reports/{report['hash']}").json()["report"] == report
    assert restarted.post("/v1/verify", json={"report": report}).json()["valid"] is True
    assert restarted.get("/v1/roots").json() == roots


def test_listing_is_newest_first_with_a_stable_cursor_and_filters(make_client, database_url):
    client = make_client(database_url)
    made = [attest(client, operator_id=f"op-{i % 2}", account=ALICE if i < 3 else BOB).json()
            ["hash"] for i in range(5)]
    page1 = client.get("/v1/reports", params={"limit": 2}).json()
    assert [r["hash"] for r in page1["reports"]] == made[4:2:-1]
    attest(client, operator_id="late")  # a new report does not move the next page
    page2 = client.get("/v1/reports", params={"limit": 2, "cursor": page1["next_cursor"]}).json()
    assert [r["hash"] for r in page2["reports"]] == made[2:0:-1]
    page3 = client.get("/v1/reports", params={"limit": 2, "cursor": page2["next_cursor"]}).json()
    assert [r["hash"] for r in page3["reports"]] == made[:1] and page3["next_cursor"] is None
    by_op = client.get("/v1/reports", params={"operator_id": "op-1"}).json()["reports"]
    assert [r["hash"] for r in by_op] == [made[3], made[1]]
    by_account = client.get("/v1/reports", params={"account": BOB}).json()["reports"]
    assert [r["hash"] for r in by_account] == [made[4], made[3]]


@pytest.mark.parametrize("body, field", [
    ({}, "operator_id"),
    ({"operator_id": ""}, "operator_id"),
    ({"operator_id": "x" * 65}, "operator_id"),
    ({"operator_id": "bad\nname"}, "operator_id"),
    ({"operator_id": " padded"}, "operator_id"),
    ({"operator_id": 7}, "operator_id"),
    ({"operator_id": "op", "account": "not-an-address"}, "account"),
    # A valid address of another network (prefix 0, Polkadot) is not one of this network's.
    ({"operator_id": "op", "account": "15oF4uVJwmo4TdGW7VfQxNLavjCXviqxT9S1MgbjMNHr6Sp5"},
     "account"),
    ({"operator_id": "op", "nonce": "0x1234"}, "nonce"),
    ({"operator_id": "op", "nonce": "zz" * 32}, "nonce"),
    ({"operator_id": "op", "extra": 1}, "extra"),
])
def test_bad_fields_are_400_naming_the_field(make_client, body, field):
    resp = make_client().post("/v1/attest", json=body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["field"] == field and field in error["message"]


@pytest.mark.parametrize("path, params, field", [
    ("/v1/reports/0x1234", {}, "hash"),
    ("/v1/reports", {"limit": 0}, "limit"),
    ("/v1/reports", {"limit": 101}, "limit"),
    ("/v1/reports", {"cursor": "abc"}, "cursor"),
    ("/v1/reports", {"account": "nope"}, "account"),
])
def test_bad_queries_are_400(make_client, path, params, field):
    resp = make_client().get(path, params=params)
    assert resp.status_code == 400 and resp.json()["error"]["field"] == field


def test_unknown_hash_is_404(make_client):
    resp = make_client().get("/v1/reports/0x" + "ab" * 32)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


def test_verify_names_the_failing_check(make_client):
    client = make_client()
    report = attest(client, operator_id="alice-op", account=ALICE).json()
    replay = copy.deepcopy(report)
    replay["account"] = BOB
    verdict = client.post("/v1/verify", json=replay).json()
    assert verdict["valid"] is False
    assert {c["name"] for c in verdict["checks"] if not c["ok"]} == {
        "hash", "binding.report_data"}
    expected = client.post("/v1/verify", json={"report": report,
                                                "expected": {"account": BOB}}).json()
    assert [c["name"] for c in expected["checks"] if not c["ok"]] == ["expected.account"]
    assert client.post("/v1/verify", json={"report": report, "junk": 1}).status_code == 400
    strict = make_client(accept_mock_root=False)
    verdict = strict.post("/v1/verify", json=report).json()
    assert [c["name"] for c in verdict["checks"] if not c["ok"]] == ["mock_root_accepted"]


def test_rate_limits_per_operator_and_per_address(make_client):
    client = make_client(operator_limit=2, ip_limit=3)
    assert attest(client, operator_id="busy").status_code == 201
    assert attest(client, operator_id="busy").status_code == 201
    refused = attest(client, operator_id="busy")
    assert refused.status_code == 429 and refused.json()["error"]["rule"] == "operator"
    assert int(refused.headers["Retry-After"]) >= 1
    assert attest(client, operator_id="other").status_code == 201
    refused = attest(client, operator_id="third")
    assert refused.status_code == 429 and refused.json()["error"]["rule"] == "ip"
    # Refused requests reserved nothing: the limits survive a restart, and count the same.
    again = make_client(operator_limit=2, ip_limit=3)
    assert attest(again, operator_id="fourth").json()["error"]["rule"] == "ip"


def test_reports_of_an_earlier_network_stay_browsable_and_marked(make_client):
    import datetime as dt

    from ops_tools.services.attestation.pki import MockPki
    from ops_tools.services.attestation.report import IssueRequest, issue
    from tests.services.attestation.conftest import SEED_TEXT

    client = make_client()
    old = issue(MockPki(SEED_TEXT.encode()), IssueRequest(
        "old-op", None, os.urandom(32), "0x" + "99" * 32, dt.datetime.now(dt.UTC),
        dt.timedelta(days=1)))
    client.app.state.store.add(old)
    got = client.get(f"/v1/reports/{old['hash']}").json()
    assert got["network"]["earlier"] is True
    listed = client.get("/v1/reports").json()["reports"]
    assert listed[0]["hash"] == old["hash"] and listed[0]["earlier_network"] is True
    verdict = client.post("/v1/verify", json=old).json()
    assert [c["name"] for c in verdict["checks"] if not c["ok"]] == ["network"]


def test_roots_are_published_as_mock(make_client):
    roots = make_client().get("/v1/roots").json()
    assert roots["mock"] is True and roots["roots"][0]["mock"] is True
    assert "MOCK" in roots["roots"][0]["name"]
    assert roots["roots"][0]["pem"].startswith("-----BEGIN CERTIFICATE-----")


def test_a_seed_file_readable_by_others_is_refused_without_showing_it(tmp_path, devnode):
    from ops_tools.errors import InputError
    from ops_tools.services.attestation.app import build_app
    from ops_tools.services.attestation.settings import AttestationSettings

    seed = tmp_path / "seed"
    seed.write_text("a-secret-seed-value-0123456789")
    os.chmod(seed, 0o644)
    settings = AttestationSettings(listen_port=8002, state_dir=tmp_path, rpc_url=devnode.ws_url,
                                   mock_root_seed_file=seed)
    with pytest.raises(InputError) as err:
        build_app(settings)
    assert "mock_root_seed_file" in str(err.value) and "a-secret" not in str(err.value)


def test_an_eight_gpu_report_round_trips(make_client):
    client = make_client(gpu_count=8)
    report = attest(client, operator_id="big-box").json()
    assert [g["index"] for g in report["gpu_evidence"]] == list(range(8))
    verdict = client.post("/v1/verify", json=report).json()
    assert verdict["valid"] is True
    assert {f"gpu[{i}].nonce" for i in range(8)} <= {c["name"] for c in verdict["checks"]}
