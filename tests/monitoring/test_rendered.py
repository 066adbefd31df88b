"""Prometheus's configuration comes from the inventory: a node or service host added there is
scraped after the next converge with no other edit; promtool and amtool accept what the role
renders, for the local network and for the testnet's shape."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.monitoring.conftest import ROOT, render, tool

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def _targets(prometheus_yml: Path) -> dict[str, dict[str, dict]]:
    """job -> target -> its labels."""
    config = yaml.safe_load(prometheus_yml.read_text())
    return {job["job_name"]: {t: group.get("labels", {})
                              for group in job.get("static_configs") or []
                              for t in group["targets"]}
            for job in config["scrape_configs"]}


def _check(out: Path) -> None:
    shutil.copytree(out, out / "check", dirs_exist_ok=True)
    (out / "check" / "rules").mkdir(exist_ok=True)
    shutil.copy(out / "net.yml", out / "check" / "rules" / "net.yml")
    for cmd in ([tool("promtool"), "check", "config", str(out / "check" / "prometheus.yml")],
                [tool("amtool"), "check-config", str(out / "alertmanager.yml")],
                [tool("prometheus-blackbox-exporter"), "--config.check",
                 f"--config.file={out / 'blackbox.yml'}"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_local_targets_and_tools_accept_the_config(local_render: Path) -> None:
    _check(local_render)
    jobs = _targets(local_render / "prometheus.yml")
    assert jobs["node"] == {
        "127.0.0.1:9615": {"host": "authority-0", "role": "authority"},
        "127.0.0.1:9616": {"host": "authority-1", "role": "authority"},
        "127.0.0.1:9617": {"host": "rpc-0", "role": "rpc"},
    }
    assert jobs["service"]["127.0.0.1:8001"] == {"host": "faucet-0", "service": "faucet"}
    # The operator's worker (group workers) is no network service.
    assert "worker-0" not in {t["host"] for job in ("service", "ready")
                              for t in jobs[job].values()}
    assert len(jobs["service"]) == 5
    assert jobs["ready"]["http://127.0.0.1:8004/ready"]["host"] == "indexer-0"
    assert set(jobs["public_rpc"]) == {"http://127.0.0.1:9944"}
    # The docs site, and each service whose inventory sets a public URL (the indexer's).
    assert set(jobs["public"]) == {"http://127.0.0.1:8080/", "http://127.0.0.1:8004/ready"}
    alertmanager = yaml.safe_load((local_render / "alertmanager.yml").read_text())
    assert alertmanager["receivers"][0]["webhook_configs"][0]["url"] == \
        "http://127.0.0.1:9197/alerts"


def test_a_host_added_to_the_inventory_is_scraped(tmp_path: Path) -> None:
    extra = tmp_path / "more.yml"
    extra.write_text(yaml.safe_dump({"all": {"children": {
        "nodes": {"children": {"rpc_nodes": {"hosts": {"rpc-1": {
            "node_rpc_port": 9947, "node_p2p_port": 30336, "node_prometheus_port": 9618}}}}},
        "services": {"children": {"faucet": {"hosts": {"faucet-1": {
            "faucet_listen_port": 8011}}}}},
    }}}))
    out = tmp_path / "render"
    render(ROOT / "inventories" / "local", out, "-i", str(extra))
    jobs = _targets(out / "prometheus.yml")
    assert jobs["node"]["127.0.0.1:9618"] == {"host": "rpc-1", "role": "rpc"}
    assert jobs["service"]["127.0.0.1:8011"] == {"host": "faucet-1", "service": "faucet"}
    assert jobs["ready"]["http://127.0.0.1:8011/ready"]["host"] == "faucet-1"
    assert len(jobs["node"]) == 4


def test_testnet_scrapes_services_on_loopback_and_probes_through_the_edge(tmp_path: Path) -> None:
    out = render(ROOT / "inventories" / "testnet", tmp_path / "render",
                 "-e", "vault_monitoring_webhook_url=https://hooks.example.invalid/x")
    _check(out)
    jobs = _targets(out / "prometheus.yml")
    # The services and their node share services-0 with the monitoring: loopback.
    assert jobs["node"]["127.0.0.1:9615"]["host"] == "services-node-0"
    assert jobs["node"]["authority-0.testnet.invalid:9615"]["host"] == "authority-0"
    assert all(t.startswith("127.0.0.1:") for t in jobs["service"])
    assert "https://faucet.testnet.invalid/ready" in jobs["public"]
    assert set(jobs["public_rpc"]) == {"https://rpc.testnet.invalid"}
    rules = (out / "net.yml").read_text()
    assert "slot time (6000 ms)" in rules
    assert "for: 120000ms" in rules  # 20 blocks of 6 s: finality stalled
