"""The attestation service over HTTP, on SQLite and PostgreSQL, against a real devnode."""

from __future__ import annotations

import copy
import os
import time

import pytest
from sqlalchemy import create_engine, text
from substrateinterface import Keypair

from ops_tools.attestation.canonical import report_hash
from ops_tools.wallet.attest import signed_request
from tests.conftest import free_port
from tests.support.devnode import rpc as rpc_call

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
    assert report["genesis_hash"] == rpc_call(devnode.http, "chain_getBlockHash", [0])
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


PROXY = {"trusted_proxies": ["127.0.0.1/32"]}


def from_client(address: str) -> dict[str, str]:
    """Headers of a request relayed by the trusted proxy (the test client's 127.0.0.1)."""
    return {"X-Forwarded-For": address}


def signed_body(keypair: Keypair, genesis: str, operator_id: str, *,
                signed_at: int | None = None) -> dict:
    return signed_request(keypair, genesis, operator_id, os.urandom(32), signed_at)


def test_verify_without_an_answering_chain_says_the_genesis_was_not_checked(make_client):
    report = attest(make_client(), operator_id="alice-op", account=ALICE).json()
    # The same database, restarted against an address where no chain answers.
    blind = make_client(rpc_url=f"ws://127.0.0.1:{free_port()}")
    verdict = blind.post("/v1/verify", json=report).json()
    assert verdict["valid"] is False
    network = next(c for c in verdict["checks"] if c["name"] == "network")
    assert network["ok"] is False and "not checked" in network["detail"]
    assert [c["name"] for c in verdict["checks"] if not c["ok"]] == ["network"]


def test_a_stored_unsigned_version_1_report_stays_browsable_and_verifies_invalid(make_client):
    """A report issued before reports were signed, as the database of an upgraded service
    holds it: served as it is, and invalid with the reason and what to do."""
    client = make_client()
    old = attest(client, operator_id="old-op", account=ALICE).json()
    del old["signature"]
    old["version"] = 1
    old["hash"] = "0x" + "0e" * 32
    client.app.state.store.add(old)
    assert client.get(f"/v1/reports/{old['hash']}").json()["report"] == old
    verdict = client.post("/v1/verify", json=old).json()
    assert verdict["valid"] is False and [c["name"] for c in verdict["checks"]] == ["format"]
    assert "unsigned report" in verdict["checks"][0]["detail"]


def test_an_edited_and_rehashed_report_fails_the_signature_over_http(make_client):
    client = make_client()
    report = attest(client, operator_id="alice-op", account=ALICE).json()
    forged = copy.deepcopy(report)
    forged["expires_at"] = "2099-01-01T00:00:00Z"
    forged["hash"] = report_hash(forged)
    verdict = client.post("/v1/verify", json=forged).json()
    assert verdict["valid"] is False
    assert [c["name"] for c in verdict["checks"] if not c["ok"]] == ["signature"]


def test_each_signed_member_edited_and_rehashed_fails_verify_over_http(make_client):
    """Issue 29, through ``/v1/verify`` itself: each member the signature must cover (account,
    operator id, genesis, issued and expiry times, nonce, the quote) edited in turn, the public
    hash recomputed, and the verifier told to expect the edited subject, as a forger would."""
    client = make_client()
    report = attest(client, operator_id="alice-op", account=ALICE).json()
    other = attest(client, operator_id="mallory-op", account=BOB).json()
    edits = {
        "account": BOB,
        "operator_id": "victim-op",
        "genesis_hash": "0x" + "77" * 32,
        "issued_at": "2026-01-01T00:00:00Z",
        "expires_at": "2099-01-01T00:00:00Z",
        "nonce": other["nonce"],
        "quote": other["quote"],
    }
    for field, value in edits.items():
        forged = {**copy.deepcopy(report), field: value}
        forged["hash"] = report_hash(forged)
        expected = {field: value} if field in ("account", "operator_id", "nonce") else {}
        verdict = client.post("/v1/verify", json={"report": forged, "expected": expected}).json()
        failed = [c["name"] for c in verdict["checks"] if not c["ok"]]
        assert verdict["valid"] is False, field
        # The hash is right (the forger recomputed it); the signature over it is not.
        assert "hash" not in failed and "signature" in failed, (field, failed)
        signature = next(c for c in verdict["checks"] if c["name"] == "signature")
        assert "the report's hash is not signed" in signature["detail"], field


def test_unsigned_requests_are_limited_per_client_address_whatever_operator_id(make_client):
    client = make_client(ip_limit=3, **PROXY)
    for name in ("a", "b", "c"):
        assert attest(client, operator_id=name).status_code == 201
    refused = client.post("/v1/attest", json={"operator_id": "d"})
    assert refused.status_code == 429 and refused.json()["error"]["rule"] == "ip"
    assert int(refused.headers["Retry-After"]) >= 1
    # A client cannot pick its address: X-Forwarded-For from an untrusted peer is ignored.
    direct = make_client(ip_limit=3)
    spoofed = direct.post("/v1/attest", json={"operator_id": "d"},
                          headers=from_client("198.51.100.1"))
    assert spoofed.status_code == 429
    # Through the trusted proxy, another client has its own budget.
    other = client.post("/v1/attest", json={"operator_id": "a"},
                        headers=from_client("198.51.100.1"))
    assert other.status_code == 201
    # Refused requests reserved nothing: the limits survive a restart, and count the same.
    again = make_client(ip_limit=3, **PROXY)
    assert attest(again, operator_id="e").json()["error"]["rule"] == "ip"


def test_requests_for_a_victims_name_never_block_the_victims_signed_request(make_client):
    """Issue 29's attack: 12 requests for operator id "victim" from one client, then the
    victim's own signed request (from that same address, a shared NAT at worst)."""
    client = make_client(ip_limit=10, account_limit=10, **PROXY)
    attacker = from_client("203.0.113.7")
    answers = [client.post("/v1/attest", json={"operator_id": "victim"}, headers=attacker)
               for _ in range(12)]
    assert [a.status_code for a in answers] == [201] * 10 + [429] * 2
    assert {a.json()["error"]["rule"] for a in answers[10:]} == {"ip"}
    victim = Keypair.create_from_uri("//VictimOperator")
    genesis = answers[0].json()["genesis_hash"]
    mine = client.post("/v1/attest", json=signed_body(victim, genesis, "victim"),
                       headers=attacker)
    assert mine.status_code == 201, mine.text
    assert mine.json()["account"] == victim.ss58_address
    # And from the victim's own address, unsigned, too.
    assert client.post("/v1/attest", json={"operator_id": "victim"},
                       headers=from_client("198.51.100.9")).status_code == 201


def test_signed_requests_count_per_account_and_refuse_forgery_staleness_and_replay(
        make_client):
    client = make_client(account_limit=2, **PROXY)
    op = Keypair.create_from_uri("//SignedOperator")
    genesis = attest(client, operator_id="probe").json()["genesis_hash"]
    first = signed_body(op, genesis, "op-signed")
    assert client.post("/v1/attest", json=first).status_code == 201
    replay = client.post("/v1/attest", json=first)
    assert replay.status_code == 409 and replay.json()["error"]["code"] == "replayed_request"
    # Signed by someone else for op's account: refused, naming the signature.
    mallory = Keypair.create_from_uri("//Mallory")
    forged = {**signed_body(mallory, genesis, "op-signed"), "account": op.ss58_address}
    refused = client.post("/v1/attest", json=forged)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "signature"
    # The operator id is signed: another name under op's signature does not verify.
    renamed = {**signed_body(op, genesis, "op-signed"), "operator_id": "someone-else"}
    assert client.post("/v1/attest", json=renamed).json()["error"]["field"] == "signature"
    stale = signed_body(op, genesis, "op-signed", signed_at=int(time.time()) - 3600)
    assert client.post("/v1/attest", json=stale).json()["error"]["field"] == "signed_at"
    no_nonce = {k: v for k, v in signed_body(op, genesis, "op-signed").items() if k != "nonce"}
    assert client.post("/v1/attest", json=no_nonce).json()["error"]["field"] == "nonce"
    other_net = signed_body(op, "0x" + "77" * 32, "op-signed")
    assert client.post("/v1/attest", json=other_net).json()["error"]["field"] == "signature"
    assert client.post("/v1/attest", json=signed_body(op, genesis, "op-signed")).status_code \
        == 201
    third = signed_body(op, genesis, "op-signed")
    refused = client.post("/v1/attest", json=third)
    assert refused.status_code == 429 and refused.json()["error"]["rule"] == "account"
    other = Keypair.create_from_uri("//OtherOperator")
    assert client.post("/v1/attest", json=signed_body(other, genesis, "x")).status_code == 201
    # The refused request reserved nothing, its nonce included: once the limit allows (a
    # restart with a larger one), the same signed request is answered, not called a replay.
    roomier = make_client(account_limit=3, **PROXY)
    assert roomier.post("/v1/attest", json=third).status_code == 201


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
    from ops_tools.services.attestation.config import AttestationSettings

    seed = tmp_path / "seed"
    seed.write_text("a-secret-seed-value-0123456789")
    os.chmod(seed, 0o644)
    settings = AttestationSettings(listen_port=8002, state_dir=tmp_path, rpc_url=devnode.ws,
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


@pytest.mark.parametrize("salt", ["database", "file"])
def test_two_instances_on_one_postgresql_enforce_one_limit(make_client, postgres_server,
                                                           tmp_path, salt):
    """Each instance has its own state directory (its own host); the salt of the hashed limit
    keys comes from the database, or from one configured secret, so a client's requests count
    once whichever instance they reach."""
    db_url = postgres_server.create_database(f"attest_shared_{salt}_{free_port()}")
    extra: dict = {}
    if salt == "file":
        salt_file = tmp_path / "salt-secret"
        salt_file.write_text("one secret salt for every instance\n")
        os.chmod(salt_file, 0o600)
        extra["salt_file"] = salt_file
    a, b = (make_client(db_url, state_dir=tmp_path / name, ip_limit=3, **PROXY, **extra)
            for name in ("a", "b"))
    client = from_client("198.51.100.7")
    assert [attest_as(x, client, name).status_code
            for x, name in ((a, "one"), (b, "two"), (a, "three"))] == [201] * 3
    for instance in (a, b):
        refused = attest_as(instance, client, "four")
        assert refused.status_code == 429 and refused.json()["error"]["rule"] == "ip"
    assert attest_as(b, from_client("198.51.100.8"), "other").status_code == 201
    engine = create_engine(db_url)
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT count(*) FROM attest_shared")).scalar()
    engine.dispose()
    # The configured secret is the key; otherwise the first instance created the shared one.
    assert kept == (0 if salt == "file" else 1)
    assert not (tmp_path / "a" / "salt").exists() and not (tmp_path / "b" / "salt").exists()


def test_an_instances_own_salt_of_earlier_versions_seeds_the_shared_one(
        make_client, postgres_server, tmp_path):
    """An upgraded instance keeps counting what it counted: its state_dir/salt becomes the
    database's salt, and a second instance uses it too."""
    db_url = postgres_server.create_database(f"attest_legacy_{free_port()}")
    (tmp_path / "a").mkdir()
    own = os.urandom(32)
    (tmp_path / "a" / "salt").write_bytes(own)
    a = make_client(db_url, state_dir=tmp_path / "a", ip_limit=2, **PROXY)
    client = from_client("198.51.100.9")
    assert attest_as(a, client, "before").status_code == 201
    b = make_client(db_url, state_dir=tmp_path / "b", ip_limit=2, **PROXY)
    assert attest_as(b, client, "after").status_code == 201
    assert attest_as(b, client, "over").status_code == 429
    engine = create_engine(db_url)
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT value FROM attest_shared WHERE name = 'salt'")).scalar()
    engine.dispose()
    assert kept == own.hex()


def attest_as(client, headers: dict[str, str], operator_id: str):
    return client.post("/v1/attest", json={"operator_id": operator_id}, headers=headers)


def test_issue_failures_on_the_service_side_are_counted_for_the_monitoring(make_client):
    """A chain that does not answer fails an attest request with 503 (not the client's fault):
    attestation_issue_errors_total counts it by reason, which AttestationIssueErrors watches;
    a client's bad input is not counted."""
    blind = make_client(rpc_url=f"ws://127.0.0.1:{free_port()}")
    assert blind.post("/v1/attest", json={"operator_id": "x" * 500}).status_code == 400
    assert attest(blind, operator_id="alice-op", account=ALICE).status_code == 503
    metrics = blind.get("/metrics").text
    assert 'attestation_issue_errors_total{reason="chain_unavailable"} 1.0' in metrics
    assert "attestation_issue_errors_total{" not in metrics.replace(
        'attestation_issue_errors_total{reason="chain_unavailable"}', "")
