"""A node that hangs, not dies, for 30 s: the attestation service, the explorer and the indexer
(its processor and its API) each turn ``/ready`` red within their timeouts, answer from what
they hold without a 500, and are green again when the node answers, with nothing lost: reports
issued before verify again, blocks and a transfer made during the hang are indexed.

Hung as the network hangs it: a real TCP proxy (tests/services/tcp_proxy.py) between the
services and a real development node that holds every byte either way, on new and kept-alive
connections alike, while the node itself goes on producing blocks. The faucet's and the
gateway's own tests: tests/services/faucet/test_faults.py, tests/services/gateway/
test_chain_hang.py.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from substrateinterface import Keypair

from tests.services.explorer.processes import run_service
from tests.services.indexer.harness import Indexer
from tests.services.tcp_proxy import TcpProxy
from tests.support.devnode import DevNode, fund
from tests.support.devnode import rpc as rpc_call

pytestmark = pytest.mark.timeout(600)

HANG_S = 30.0
# Generous: the readiness probes time out in seconds, but the machine is shared.
WITHIN_S = 90.0


@pytest.fixture
def proxy(devnode: DevNode) -> Iterator[TcpProxy]:
    url = urllib.parse.urlsplit(devnode.ws)
    tcp = TcpProxy((str(url.hostname), int(url.port or 80)))
    try:
        yield tcp
    finally:
        tcp.hang.clear()
        tcp.close()


def ws(proxy: TcpProxy) -> str:
    return proxy.url.replace("http://", "ws://")


def wait(what: str, predicate: Callable[[], Any], timeout: float = WITHIN_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def ready(url: str) -> int:
    try:
        return httpx.get(url + "/ready", timeout=30).status_code
    except httpx.HTTPError:
        return 0


def hold(since: float) -> None:
    """Keep the node hung until HANG_S have passed since it hung."""
    time.sleep(max(0.0, HANG_S - (time.monotonic() - since)))


def test_attestation_and_explorer(tmp_path: Path, devnode: DevNode, proxy: TcpProxy) -> None:
    seed = tmp_path / "seed"
    seed.write_text("hung-node-test-seed-4a1c9e7b2d\n")
    seed.chmod(0o600)
    with run_service("attestation", tmp_path / "attestation", {
        "rpc_url": ws(proxy), "mock_root_seed_file": str(seed),
    }) as attestation, run_service("explorer", tmp_path / "explorer", {
        "rpc_url": ws(proxy), "attestation_url": attestation.url, "anchor_cache_s": 0,
    }) as explorer:
        report = httpx.post(attestation.url + "/v1/attest", json={"operator_id": "before"},
                            timeout=30).json()
        assert httpx.post(attestation.url + "/v1/verify", json=report,
                          timeout=30).json()["valid"] is True
        shown = httpx.get(f"{explorer.url}/reports/{report['hash']}", timeout=60)
        assert shown.status_code == 200 and 'id="anchor-error"' not in shown.text

        proxy.hang.set()
        since = time.monotonic()
        wait("both /ready to turn red", lambda: ready(attestation.url) == ready(explorer.url)
             == 503)
        red = httpx.get(attestation.url + "/ready", timeout=30).json()["error"]["checks"]
        assert [c["name"] for c in red if not c["ok"]] == ["chain"], red
        # What the services hold is still served; what needs the chain says so, never a 500.
        kept = httpx.get(f"{attestation.url}/v1/reports/{report['hash']}", timeout=30)
        assert kept.status_code == 200 and kept.json()["report"] == report
        blind = httpx.post(attestation.url + "/v1/verify", json=report, timeout=60).json()
        network = next(c for c in blind["checks"] if c["name"] == "network")
        assert blind["valid"] is False and "not checked" in network["detail"]
        # The report page: the attestation service's verdict, and the on-chain anchor given up
        # within upstream_timeout_s, saying so.
        page = httpx.get(f"{explorer.url}/reports/{report['hash']}", timeout=60)
        assert page.status_code == 200 and report["hash"] in page.text
        assert 'id="anchor-error"' in page.text and "cannot be read" in page.text
        hold(since)
        assert attestation.proc.poll() is None and explorer.proc.poll() is None
        proxy.hang.clear()

        wait("both /ready to be green again", lambda: ready(attestation.url) == ready(
            explorer.url) == 200)
        assert httpx.post(attestation.url + "/v1/verify", json=report,
                          timeout=30).json()["valid"] is True
        after = httpx.post(attestation.url + "/v1/attest", json={"operator_id": "after"},
                           timeout=30)
        assert after.status_code == 201, after.text
        listed = httpx.get(attestation.url + "/v1/reports", timeout=30).json()["reports"]
        assert [r["hash"] for r in listed] == [after.json()["hash"], report["hash"]]


TRANSFERS_TO = """query($to: String!) { transfers(to: $to, first: 10) {
  edges { node { amount blockNumber } } } }"""


def test_indexer(tmp_path: Path, devnode: DevNode, proxy: TcpProxy) -> None:
    ix = Indexer(tmp_path / "indexer", ws(proxy), f"sqlite:///{tmp_path / 'index.db'}").start()
    try:
        head = int(rpc_call(devnode.http, "chain_getHeader", [])["number"], 16)
        ix.wait_height(head, timeout=WITHIN_S)
        ix.wait_for(lambda: ready(ix.url) == 200 and ix.processor_ready()[0] == 200, WITHIN_S,
                    "both programs ready")

        proxy.hang.set()
        since = time.monotonic()
        ix.wait_for(lambda: ix.processor_ready()[0] == 503 and ready(ix.url) == 503, WITHIN_S,
                    "both /ready to turn red")
        # The node goes on; a transfer is made while the indexer cannot see it.
        recipient = Keypair.create_from_mnemonic(Keypair.generate_mnemonic()).ss58_address
        fund(devnode, {recipient: 7 * 10**12})
        # The API still answers from its database.
        assert ix.status() is not None
        hold(since)
        assert all(p.poll() is None for p in ix.procs.values())
        proxy.hang.clear()

        ix.wait_for(lambda: ix.processor_ready()[0] == 200 and ready(ix.url) == 200, WITHIN_S,
                    "both /ready to be green again")
        head = int(rpc_call(devnode.http, "chain_getHeader", [])["number"], 16)
        status = ix.wait_height(head, timeout=WITHIN_S)
        indexed = rpc_call(devnode.http, "chain_getBlockHash", [status["height"]])
        assert status["hash"] == indexed, status
        edges = ix.data(TRANSFERS_TO, {"to": recipient})["transfers"]["edges"]
        assert [int(e["node"]["amount"]) for e in edges] == [7 * 10**12]
    finally:
        ix.stop()
