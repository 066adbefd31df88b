"""A hung node cannot hold the gateway: every chain RPC call times out, the chain view expires
(the gateway routes nowhere and says why), and ``/ready`` turns red; when the node answers again,
all of it comes back. Hung two ways: a real TCP proxy in front of a real development node that
accepts and never answers (new and kept-alive connections alike), and the node itself stopped
(SIGSTOP by its PID, then SIGCONT)."""

from __future__ import annotations

import os
import signal
import urllib.parse

import httpx
import pytest

from tests.services.tcp_proxy import TcpProxy

from .harness import start_chain, start_gateway, wait_for

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def _check(gw, name: str) -> dict:
    doc = httpx.get(gw.url + "/ready", timeout=30).json()
    checks = doc.get("checks") or doc.get("error", {}).get("checks") or []
    return next(c for c in checks if c["name"] == name)


def test_a_hung_node_turns_ready_red_and_expires_the_chain_view(tmp_path, chain):
    url = urllib.parse.urlsplit(chain.http)
    proxy = TcpProxy((url.hostname, url.port))
    gw = start_gateway(tmp_path, chain, f"sqlite:///{tmp_path / 'gw.sqlite3'}", settle=False,
                       extra={"rpc_url": proxy.url, "chain_rpc_timeout_s": 1.0,
                              "chain_view_max_age_s": 3.0})
    try:
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 200, 60,
                 "the gateway to be ready")
        assert gw.workers()["current_epoch"] is not None
        proxy.hang.set()
        # Bounded: the calls time out (1 s), the view expires (3 s); the wait is generous only
        # because the machine is shared.
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 503, 60,
                 "/ready to turn red")
        view = _check(gw, "chain_view")
        assert not view["ok"] and "no chain read for" in view["detail"]
        workers = gw.workers()
        assert workers["current_epoch"] is None and workers["chain_error"]
        assert gw.proc.alive()
        proxy.hang.clear()
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 200, 60,
                 "/ready to be green again")
        assert gw.workers()["current_epoch"] is not None
    finally:
        gw.proc.stop()
        proxy.close()


def test_a_gateway_started_before_its_node_answers_reads_again_soon_not_a_poll_later(
        tmp_path, chain):
    """A reset restarts the services while the new chain is not served yet: the failed reads
    are retried within a second, not at the next ``chain_poll_s`` (10 min here)."""
    url = urllib.parse.urlsplit(chain.http)
    genesis = httpx.post(chain.http, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "chain_getBlockHash", "params": [0]}).json()["result"]
    proxy = TcpProxy((url.hostname, url.port))
    proxy.hang.set()
    # As deployed: the configuration names the genesis, so the gateway starts without its node.
    gw = start_gateway(tmp_path, chain, f"sqlite:///{tmp_path / 'gw.sqlite3'}", settle=False,
                       extra={"rpc_url": proxy.url, "chain_rpc_timeout_s": 1.0,
                              "chain_poll_s": 600.0, "genesis_hash": genesis})
    try:
        assert gw.workers()["chain_error"]
        assert httpx.get(gw.url + "/ready", timeout=30).status_code == 503
        proxy.hang.clear()
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 200, 120,
                 "/ready once the node answers")
        assert gw.workers()["current_epoch"] is not None
    finally:
        gw.proc.stop()
        proxy.close()


def test_a_stopped_node_turns_ready_red_until_it_continues(tmp_path):
    node = start_chain(tmp_path / "chain")  # its own: the suite's chain is not stopped
    gw = None
    try:
        gw = start_gateway(tmp_path / "gw", node, f"sqlite:///{tmp_path / 'gw.sqlite3'}",
                           settle=False, extra={"rpc_url": node.http, "chain_rpc_timeout_s": 1.0,
                                                "chain_view_max_age_s": 3.0})
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 200, 60,
                 "the gateway to be ready")
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGSTOP)
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 503, 60,
                 "/ready to turn red")
        view = _check(gw, "chain_view")
        assert not view["ok"] and "no chain read for" in view["detail"]
        assert gw.workers()["current_epoch"] is None
        os.kill(node.proc.pid, signal.SIGCONT)
        wait_for(lambda: httpx.get(gw.url + "/ready", timeout=30).status_code == 200, 60,
                 "/ready to be green again")
        assert gw.workers()["current_epoch"] is not None
    finally:
        if node.proc is not None and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGCONT)
        if gw is not None:
            gw.proc.stop()
        node.stop()
