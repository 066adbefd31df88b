"""Limits of a running faucet: client addresses (spoofing, trusted proxies), restarts with
SQLite and PostgreSQL, a network reset, and the secret kept out of logs, argv and errors."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from substrateinterface import Keypair

from ops_tools.chain.rpc import RpcClient
from tests.conftest import ROOT
from tests.services.faucet.conftest import (
    DRIP,
    FAUCET_KEY,
    Running,
    faucet_config,
    fresh,
    run_faucet,
)
from tests.support.devnode import DevNode, free_balance, fund, run_devnode


def test_a_spoofed_forwarded_for_from_an_untrusted_peer_changes_nothing(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    cfg = faucet_config(tmp_path, funded_faucet, limits={"per_ip": {"count": 2,
                                                                  "window_s": 3600}})
    with run_faucet(cfg) as faucet:
        answers = [
            faucet.post({"recipient": fresh(f"spoof-{i}")},
                        headers={"X-Forwarded-For": f"203.0.113.{i}"})
            for i in range(3)
        ]
    assert [a.status_code for a in answers] == [200, 200, 429], [a.text for a in answers]
    refusal = answers[2]
    assert refusal.json()["error"]["code"] == "ip_limit"
    assert refusal.json()["error"]["limit"] == "ip"
    assert int(refusal.headers["Retry-After"]) > 3500


def test_through_a_trusted_proxy_the_forwarded_address_is_limited(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    cfg = faucet_config(tmp_path, funded_faucet, trusted_proxies=["127.0.0.1/32"],
                        limits={"per_ip": {"count": 1, "window_s": 3600}})
    with run_faucet(cfg) as faucet:
        def ask(forwarded: str) -> httpx.Response:
            return faucet.post({"recipient": fresh("proxied")},
                               headers={"X-Forwarded-For": forwarded})

        first = ask("198.51.100.7")
        second = ask("198.51.100.7")
        # The client wrote an address of its own to the left; the proxy appended the real one.
        sneaky = ask("198.51.100.99, 198.51.100.7")
        other = ask("198.51.100.8")
    assert first.status_code == 200, first.text
    assert second.status_code == 429 and second.json()["error"]["code"] == "ip_limit"
    assert sneaky.status_code == 429 and sneaky.json()["error"]["code"] == "ip_limit"
    assert other.status_code == 200, other.text


def test_exempt_networks_skip_the_ip_limit_not_the_recipient_one(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    cfg = faucet_config(tmp_path, funded_faucet, limits={
        "per_ip": {"count": 1, "window_s": 3600}, "exempt_networks": ["127.0.0.0/8"]})
    with run_faucet(cfg) as faucet:
        dests = [fresh(f"exempt-{i}") for i in range(3)]
        answers = [faucet.post({"recipient": d}) for d in dests]
        again = faucet.post({"recipient": dests[0]})
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert again.status_code == 429 and again.json()["error"]["code"] == "recipient_limit"


def _rows(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = [str(r) for r in conn.execute(text("SELECT * FROM faucet_drips"))]
            rows += [str(r) for r in conn.execute(text("SELECT * FROM faucet_rate_events"))]
            return rows
    finally:
        engine.dispose()


def test_limits_survive_a_restart(
    funded_faucet: DevNode, tmp_path: Path, database_url: str
) -> None:
    cfg = faucet_config(tmp_path, funded_faucet, database_url=database_url,
                        limits={"per_ip": {"count": 2, "window_s": 3600}})
    dest = fresh("restart")
    with run_faucet(cfg) as faucet:
        assert faucet.post({"recipient": dest}).status_code == 200
        assert faucet.post({"recipient": fresh("restart-2")}).status_code == 200
    with run_faucet(cfg) as faucet:
        same = faucet.post({"recipient": dest})
        by_ip = faucet.post({"recipient": fresh("restart-3")})
    assert same.status_code == 429 and same.json()["error"]["code"] == "recipient_limit"
    assert by_ip.status_code == 429 and by_ip.json()["error"]["code"] == "ip_limit"
    assert free_balance(funded_faucet.reader(), dest) == DRIP
    stored = "\n".join(_rows(database_url))
    assert stored  # the rows exist, and hold neither the address nor the IP in clear
    assert dest not in stored and "127.0.0.1" not in stored
    assert Keypair(ss58_address=dest).public_key.hex() not in stored


def test_a_new_genesis_starts_the_limits_afresh_and_keeps_the_old_records(
    funded_faucet: DevNode, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db_url = f"sqlite:///{tmp_path / 'shared.db'}"
    dest = fresh("reset")
    with run_faucet(faucet_config(tmp_path / "a", funded_faucet, database_url=db_url)) as f:
        assert f.post({"recipient": dest}).status_code == 200
        assert f.post({"recipient": dest}).status_code == 429
    old_genesis = RpcClient(funded_faucet.http).genesis_hash()
    # Another network (the built-in "local" chain: another genesis), as after a reset.
    with run_devnode(tmp_path_factory.mktemp("other-net"), ["--chain", "local", "--alice",
                                                            "--tmp", "--validator"]) as other:
        fund(other, {FAUCET_KEY.ss58_address: 10**18})
        new_genesis = RpcClient(other.http).genesis_hash()
        assert new_genesis != old_genesis
        with run_faucet(faucet_config(tmp_path / "b", other, database_url=db_url)) as f:
            answer = f.post({"recipient": dest})
            assert answer.status_code == 200, answer.text
            assert answer.json()["genesis_hash"] == new_genesis
    engine = create_engine(db_url)
    with engine.connect() as conn:
        geneses = {r[0] for r in conn.execute(text("SELECT genesis FROM faucet_drips"))}
    engine.dispose()
    assert geneses == {old_genesis, new_genesis}


def test_a_faucet_started_for_another_genesis_is_not_ready(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    expected = "0x" + "ab" * 32
    cfg = faucet_config(tmp_path, funded_faucet, genesis_hash=expected)
    actual = RpcClient(funded_faucet.http).genesis_hash()
    with run_faucet(cfg) as faucet:
        answer = httpx.get(faucet.url + "/ready")
        drip = faucet.post({"recipient": fresh("wrong-genesis")})
    assert answer.status_code == 503
    assert expected in answer.text and actual in answer.text
    assert drip.status_code == 503 and drip.json()["error"]["code"] == "genesis_changed"


@pytest.fixture
def mnemonic_faucet(funded_faucet: DevNode, tmp_path: Path) -> Iterator[tuple[Running, str]]:
    mnemonic = Keypair.generate_mnemonic()
    key = Keypair.create_from_uri(mnemonic, ss58_format=42)
    fund(funded_faucet, {key.ss58_address: 10**16})
    cfg = faucet_config(tmp_path, funded_faucet, seed=mnemonic, log_level="debug")
    with run_faucet(cfg) as running:
        yield running, mnemonic


def test_the_secret_is_in_no_log_line_command_line_or_error(
    mnemonic_faucet: tuple[Running, str], tmp_path: Path
) -> None:
    faucet, mnemonic = mnemonic_faucet
    assert faucet.post({"recipient": fresh("secret")}).status_code == 200
    refused = [faucet.post({"recipient": "nope"}), faucet.post(content=b"{")]
    cmdline = Path(f"/proc/{faucet.proc.pid}/cmdline").read_bytes().decode()
    seed_file = Path(str(faucet.config).replace("faucet.yml", "faucet.seed"))
    os.chmod(seed_file, 0o644)
    bad_mode = subprocess.run(
        [sys.executable, "-m", "ops_tools.services.faucet.cli", "--config", str(faucet.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    os.chmod(seed_file, 0o600)
    seed_file.write_text(mnemonic + " extra words\n")
    bad_content = subprocess.run(
        [sys.executable, "-m", "ops_tools.services.faucet.cli", "--config", str(faucet.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert bad_mode.returncode == 2 and "chmod 600" in bad_mode.stderr
    assert bad_content.returncode == 2 and "seed_file" in bad_content.stderr
    words = mnemonic.split()
    for text_ in (faucet.log_text(), cmdline, bad_mode.stderr, bad_content.stderr,
                  *(r.text for r in refused)):
        assert mnemonic not in text_
        assert " ".join(words[:3]) not in text_
    assert '"level": "debug"' in faucet.log_text() or '"request_id"' in faucet.log_text()


def test_sigterm_finishes_the_drip_in_flight(funded_faucet: DevNode, tmp_path: Path) -> None:
    cfg = faucet_config(tmp_path, funded_faucet)
    dest = fresh("sigterm")
    with run_faucet(cfg) as faucet, concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(faucet.post, {"recipient": dest})
        deadline = time.monotonic() + 30
        # Wait until the drip is submitted (in flight), then ask the faucet to stop.
        while "faucet_drips_in_flight 1.0" not in httpx.get(faucet.url + "/metrics").text:
            assert time.monotonic() < deadline, "the drip was never in flight"
            time.sleep(0.05)
        faucet.proc.send_signal(signal.SIGTERM)
        answer = pending.result(timeout=60)
        assert faucet.proc.wait(timeout=60) is not None
    assert answer.status_code == 200, answer.text
    assert free_balance(funded_faucet.reader(), dest) == DRIP
    with run_faucet(cfg) as faucet:
        again = faucet.post({"recipient": dest})
    assert again.status_code == 429 and again.json()["error"]["code"] == "recipient_limit"
