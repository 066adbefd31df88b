"""The verifier: a fresh report holds; each kind of tampering fails with its check named."""

from __future__ import annotations

import base64
import copy
import datetime as dt

import pytest

from ops_tools.attestation.canonical import report_hash
from ops_tools.attestation.verify import Expected, Trust, verify_report
from ops_tools.services.attestation.pki import MockPki
from tests.services.attestation.helpers import GENESIS, NOW, TTL, make_report, trust

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"
LATER = NOW + dt.timedelta(minutes=5)


@pytest.fixture(scope="module")
def report():
    return make_report(operator_id="alice-op", account=ALICE)


def failed(report, **kw) -> list[str]:
    verdict = verify_report(report, kw.pop("trust", trust()), now=kw.pop("now", LATER),
                            genesis_hash=kw.pop("genesis_hash", GENESIS), **kw)
    return verdict.failed()


def rehash(report: dict) -> dict:
    """What a forger does after editing: recompute the (public) hash."""
    report["hash"] = report_hash(report)
    return report


def test_fresh_report_is_valid_with_every_check_named(report):
    verdict = verify_report(report, trust(), now=LATER, genesis_hash=GENESIS,
                            expected=Expected(operator_id="alice-op", account=ALICE,
                                              nonce=report["nonce"]))
    assert verdict.valid, verdict.failed()
    names = {c.name for c in verdict.checks}
    assert {"hash", "expiry", "network", "tdx.pck_chain", "tdx.quote_signature",
            "tdx.qe_report_signature", "binding.report_data", "gpu[0].nonce", "gpu[1].signature",
            "mock_root_accepted", "expected.account"} <= names


def _flip(b64: str, offset: int) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[offset] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_a_flipped_byte_anywhere_in_the_quote_is_caught_even_after_rehashing(report):
    size = len(base64.b64decode(report["quote"]))
    # Every other byte of the header and body, a stride through the signature section.
    offsets = [*range(0, 640, 2), *range(640, size, 11), size - 1]
    for offset in offsets:
        forged = copy.deepcopy(report)
        forged["quote"] = _flip(report["quote"], offset)
        bad = failed(rehash(forged))
        assert "signature" in bad, (offset, bad)
        assert all(name.startswith(("tdx.", "binding.", "signature")) for name in bad), bad


def test_a_flipped_byte_anywhere_in_gpu_evidence_is_caught(report):
    for key in ("evidence", "certificate"):
        size = len(base64.b64decode(report["gpu_evidence"][1][key]))
        for offset in [*range(0, size, 9), size - 1]:
            forged = copy.deepcopy(report)
            forged["gpu_evidence"][1][key] = _flip(report["gpu_evidence"][1][key], offset)
            bad = failed(rehash(forged))
            assert "signature" in bad, (key, offset, bad)
            assert all(name.startswith(("gpu[1].", "signature")) for name in bad), bad


def test_an_edited_field_without_rehash_fails_the_hash(report):
    forged = copy.deepcopy(report)
    forged["expires_at"] = "2099-01-01T00:00:00Z"
    assert failed(forged) == ["hash"]
    forged = copy.deepcopy(report)
    forged["measurements"]["tdx"]["td_report"]["mr_td"] = "0x" + "00" * 48
    assert set(failed(forged)) == {"hash", "tdx.measurements"}
    forged = copy.deepcopy(report)
    forged["measurements"]["gpus"][0]["claims"]["dbgstat"] = "enabled"
    assert set(failed(rehash(forged))) == {"gpu[0].claims", "signature"}


OTHER = make_report(operator_id="mallory-op", account=BOB)


@pytest.mark.parametrize("field, value", [
    ("account", BOB),
    ("account", None),
    ("operator_id", "victim-op"),
    ("genesis_hash", "0x" + "77" * 32),
    ("issued_at", "2026-11-23T04:03:00Z"),
    ("expires_at", "2099-01-01T00:00:00Z"),
    ("nonce", OTHER["nonce"]),
    ("quote", OTHER["quote"]),
    ("mock", False),
    ("gpu_evidence", OTHER["gpu_evidence"]),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else type(v).__name__)  # no random ids
def test_any_edited_member_fails_the_signature_even_after_rehashing(report, field, value):
    """The attack of issue 29: edit one member, recompute the public hash, present it (here
    with the verifier told to expect the edited value, as the forger would)."""
    forged = rehash({**copy.deepcopy(report), field: value})
    expected = Expected(**{field: value}) if field in ("operator_id", "account") else None
    genesis = value if field == "genesis_hash" else GENESIS
    verdict = verify_report(forged, trust(), now=LATER, genesis_hash=genesis, expected=expected)
    assert not verdict.valid
    assert "signature" in verdict.failed()
    assert "the report's hash is not signed" in next(
        c.detail for c in verdict.checks if c.name == "signature")


def test_a_signature_taken_from_another_report_does_not_fit(report):
    forged = copy.deepcopy(report)
    forged["signature"] = OTHER["signature"]
    assert failed(forged) == ["signature"]


def test_without_an_answering_chain_the_genesis_is_unchecked_and_the_report_not_valid(report):
    verdict = verify_report(report, trust(), now=LATER, genesis_hash=None)
    assert verdict.failed() == ["network"]
    assert "not checked" in verdict.checks[[c.name for c in verdict.checks].index("network")].detail
    assert not verdict.valid


def test_an_unsigned_version_1_report_is_invalid_with_the_reason(report):
    old = {k: v for k, v in report.items() if k != "signature"}
    old["version"] = 1
    verdict = verify_report(old, trust(), now=LATER, genesis_hash=GENESIS)
    assert verdict.failed() == ["format"]
    assert "unsigned report" in verdict.checks[0].detail and "wallet-cli attest" in \
        verdict.checks[0].detail


def test_wrong_nonce(report):
    assert failed(report, expected=Expected(nonce="0x" + "ab" * 32)) == ["expected.nonce"]
    forged = copy.deepcopy(report)
    forged["nonce"] = "0x" + "ab" * 32
    bad = failed(rehash(forged))
    assert {"binding.report_data", "gpu[0].nonce", "gpu[1].nonce", "signature"} <= set(bad)


def test_replayed_for_another_account(report):
    forged = copy.deepcopy(report)
    forged["account"] = BOB
    assert failed(rehash(forged)) == ["signature", "binding.report_data"]
    assert failed(report, expected=Expected(account=BOB)) == ["expected.account"]


def test_expired_and_not_yet_issued(report):
    assert failed(report, now=NOW + TTL) == ["expiry"]
    assert failed(report, now=NOW - dt.timedelta(hours=1)) == ["expiry"]


def test_other_network(report):
    assert failed(report, genesis_hash="0x" + "77" * 32) == ["network"]


def test_mock_root_only_when_accepted(report):
    assert failed(report, trust=trust(accept_mock=False)) == ["mock_root_accepted"]


def test_a_root_the_verifier_does_not_know(report):
    stranger = Trust((MockPki(b"some-other-deployment-seed-000").root,), accept_mock=True)
    bad = failed(report, trust=stranger)
    assert {"tdx.pck_chain", "gpu[0].cert_chain", "gpu[1].cert_chain"} <= set(bad)


def test_a_report_signed_by_another_deployment_does_not_pass_here():
    other = MockPki(b"some-other-deployment-seed-000")
    from ops_tools.services.attestation.report import IssueRequest, issue

    foreign = issue(other, IssueRequest("x", None, bytes(32), GENESIS, NOW, TTL))
    bad = failed(foreign)
    assert "tdx.pck_chain" in bad and "gpu[0].cert_chain" in bad


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("quote"), "quote"),
    (lambda r: r.update(version=3), "version"),
    (lambda r: r.update(signature="0x12"), "signature"),
    (lambda r: r.update(operator_id="\ud800"), "surrogate"),
    (lambda r: r.update(measurements={"n": 2**64}), "integer"),
    (lambda r: r.update(nonce="0x12"), "nonce"),
    (lambda r: r.update(issued_at="yesterday"), "issued_at"),
    (lambda r: r.update(gpu_evidence=[{"index": 0}]), "gpu_evidence"),
])
def test_malformed_reports_fail_the_format_check(report, mutate, field):
    forged = copy.deepcopy(report)
    mutate(forged)
    verdict = verify_report(forged, trust(), now=LATER, genesis_hash=GENESIS)
    assert [c.name for c in verdict.checks] == ["format"]
    assert field in verdict.checks[0].detail and not verdict.valid


def test_no_gpu_evidence_is_not_a_combined_report():
    report = make_report(gpus=0)
    assert failed(report) == ["gpu.count"]
