"""Benchmark: attestation reports issued per second and verify calls per second.

Starts a development node (``--dev``) and ``net-attestation`` (SQLite in a temporary state
directory, limits lifted) on free loopback ports, then measures over HTTP, one request at a
time and with several clients at once:

- ``POST /v1/attest`` (quote + one GPU's evidence signed, hashed, stored);
- ``POST /v1/verify`` of an issued report (every chain, signature and binding re-checked);

and, for reference, the same two steps in process without HTTP or storage.

Usage: .venv/bin/python benchmarks/attestation.py [--reports 300] [--clients 4]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ops_tools.attestation.verify import Trust, verify_report
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.report import IssueRequest, issue

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from tests.support.devnode import DevNode, free_port

BIN = Path(sys.executable).parent


def rate(count: int, fn, clients: int) -> float:
    started = time.perf_counter()
    if clients == 1:
        for i in range(count):
            fn(i)
    else:
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(fn, range(count)))
    return count / (time.perf_counter() - started)


def in_process(count: int) -> tuple[float, float]:
    pki = MockPki(os.urandom(32))
    now = dt.datetime.now(dt.UTC)
    made = []

    def one(i: int) -> None:
        made.append(issue(pki, IssueRequest(f"op-{i}", None, os.urandom(32), "0x" + "11" * 32,
                                            now, dt.timedelta(days=1))))

    issued = rate(count, one, 1)
    trust = Trust((pki.root,), accept_mock=True)

    def check(i: int) -> None:
        assert verify_report(made[i], trust, now=now, genesis_hash="0x" + "11" * 32).valid

    return issued, rate(count, check, 1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reports", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    issued, verified = in_process(args.reports)
    print(f"in process: issue {issued:.0f} reports/s, verify {verified:.0f} reports/s")

    with tempfile.TemporaryDirectory(prefix="bench-attest-") as tmp:
        base = Path(tmp)
        node = DevNode(base / "node" / "data", "dev", "--dev", validator_key=None).start()
        proc = None
        try:
            seed = base / "seed"
            seed.write_text(os.urandom(24).hex())
            seed.chmod(0o600)
            port = free_port()
            cfg = base / "attestation.yml"
            cfg.write_text(json.dumps({
                "listen_port": port, "state_dir": str(base / "state"), "rpc_url": node.ws,
                "mock_root_seed_file": str(seed), "account_limit": 10**9,
                "ip_limit": 10**9, "signed_ip_limit": 10**9, "log_level": "warning",
            }))
            env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
            log = (base / "attestation.log").open("wb")
            proc = subprocess.Popen([str(BIN / "net-attestation"), "--config", str(cfg)],
                                    env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/ready", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    print((base / "attestation.log").read_text()[-2000:])
                    return 1
                time.sleep(0.2)

            with httpx.Client(base_url=url, timeout=30) as client:
                reports: list[dict] = []

                def attest(i: int) -> None:
                    resp = client.post("/v1/attest", json={"operator_id": f"bench-{i}"})
                    assert resp.status_code == 201, resp.text
                    reports.append(resp.json())

                def verify(i: int) -> None:
                    resp = client.post("/v1/verify", json=reports[i % len(reports)])
                    assert resp.json()["valid"], resp.text

                for clients in sorted({1, args.clients}):
                    a = rate(args.reports, attest, clients)
                    v = rate(args.reports, verify, clients)
                    print(f"HTTP, {clients} client(s): POST /v1/attest {a:.0f} reports/s,"
                          f" POST /v1/verify {v:.0f} calls/s ({args.reports} each, SQLite)")
        finally:
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
