"""The alert rules as rendered for the local network (1 s slots, 2 s scrapes): promtool accepts
them, and promtool's unit tests show each alert firing on the series that should fire it and
staying quiet on a healthy one. The windows are the role's, read from the rendered file, so a
change of block time or of monitoring_for_blocks keeps these tests true."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.monitoring.conftest import tool

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def _durations(rules: Path) -> dict[str, int]:
    """Each alert's for: in seconds (the rendered ms)."""
    out = {}
    for group in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group["rules"]:
            match = re.fullmatch(r"(\d+)ms", str(rule.get("for", "0ms")))
            out[rule["alert"]] = int(match.group(1)) // 1000 if match else 0
    return out


def _promtool_test(tmp: Path, rules: Path, tests: list[dict]) -> subprocess.CompletedProcess:
    spec = tmp / "tests.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1s",
                                    "tests": tests}))
    return subprocess.run([tool("promtool"), "test", "rules", str(spec)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_promtool_checks_the_rules(local_render: Path) -> None:
    proc = subprocess.run([tool("promtool"), "check", "rules", str(local_render / "net.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 16 rules found" in proc.stdout


def test_for_durations_come_from_the_slot_time(local_render: Path) -> None:
    text = (local_render / "net.yml").read_text()
    assert "slot time (1000 ms)" in text
    # 20 blocks of 1 s; node down: 5 blocks, raised to three 2 s scrapes.
    assert _durations(local_render / "net.yml")["FinalityStalled"] == 20
    assert _durations(local_render / "net.yml")["NodeDown"] == 6


def _series(name: str, values: str) -> dict:
    return {"series": name, "values": values}


def test_chain_alerts_fire_on_a_stall_and_not_on_a_healthy_chain(local_render, tmp_path):
    rules = local_render / "net.yml"
    d = _durations(rules)
    fin = d["FinalityStalled"]
    # Counted in 1 s steps: finalized advances 60 s then stops; best keeps going.
    lab = 'job="node",host="authority-0",status="{}"'
    best = _series(f"substrate_block_height{{{lab.format('best')}}}", "0+1x400")
    finalized = _series(f"substrate_block_height{{{lab.format('finalized')}}}", "0+1x60 60x340")
    up_a = _series('up{job="node",host="authority-0"}', "1x400")
    up_b = _series('up{job="node",host="authority-1"}', "1x30 0x370")
    peers = _series('substrate_sub_libp2p_peers_count{job="node",host="authority-0"}', "2x400")
    gen_a = _series('net_node_genesis_info{job="node",host="authority-0",genesis_hash="0xaa"}',
                    "1x400")
    gen_b = _series('net_node_genesis_info{job="node",host="rpc-0",genesis_hash="0xbb"}',
                    "_x200 1x200")
    stalled = {"exp_labels": {"job": "node", "host": "authority-0", "status": "finalized",
                              "severity": "critical"},
               "exp_annotations": {
                   "summary": "authority-0: finality has not advanced in 20 blocks"}}
    tests = [{
        "interval": "1s",
        "input_series": [best, finalized, up_a, up_b, peers, gen_a, gen_b],
        "alert_rule_test": [
            # Finality advanced until 60 s: quiet just before the window and for: have passed ...
            {"eval_time": f"{60 + 2 * fin - 2}s", "alertname": "FinalityStalled", "exp_alerts": []},
            # ... and firing once they have (the window, then the for:).
            {"eval_time": f"{60 + 2 * fin + 1}s", "alertname": "FinalityStalled",
             "exp_alerts": [stalled]},
            {"eval_time": "300s", "alertname": "BestBlockStalled", "exp_alerts": []},
            {"eval_time": "20s", "alertname": "NodeDown", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "NodeDown", "exp_alerts": [{"exp_labels": {
                "job": "node", "host": "authority-1", "severity": "critical"},
                "exp_annotations": {"summary": "authority-1: its Prometheus endpoint does not"
                                               " answer"}}]},
            {"eval_time": "300s", "alertname": "TooFewPeers", "exp_alerts": []},
            {"eval_time": "150s", "alertname": "FinalityGap", "exp_alerts": [{"exp_labels": {
                "host": "authority-0", "severity": "warning"}, "exp_annotations": {
                "summary": "authority-0: best is 90 blocks ahead of finalized"}}]},
            {"eval_time": "199s", "alertname": "NodesOnDifferentGenesis", "exp_alerts": []},
            {"eval_time": "260s", "alertname": "NodesOnDifferentGenesis", "exp_alerts": [{
                "exp_labels": {"severity": "critical"},
                "exp_annotations": {"summary": "the nodes serve 2 different genesis hashes"}}]},
        ],
    }]
    proc = _promtool_test(tmp_path, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_service_alerts(local_render, tmp_path):
    rules = local_render / "net.yml"
    drip = 10_000_000_000_000
    tests = [{
        "interval": "1s",
        "input_series": [
            _series('probe_success{job="ready",host="faucet-0",service="faucet"}', "1x30 0x100"),
            _series('probe_success{job="public_rpc",instance="http://127.0.0.1:9944"}', "1x130"),
            _series('faucet_balance_plancks{job="service",host="faucet-0"}',
                    f"{150 * drip}x30 {99 * drip}x100"),
            _series('faucet_drip_plancks{job="service",host="faucet-0"}', f"{drip}x130"),
            _series('net_http_requests_total{job="service",host="gateway-0",service="gateway",'
                    'status="200"}', "0+10x130"),
            _series('net_http_requests_total{job="service",host="gateway-0",service="gateway",'
                    'status="502"}', "0x30 0+5x100"),
            _series('probe_ssl_earliest_cert_expiry{job="public",instance="https://a/ready"}',
                    f"{13 * 86400}x130"),
            # 30 days left: no alert for it (the expected list below is exactly the other one).
            _series('probe_ssl_earliest_cert_expiry{job="public",instance="https://b/ready"}',
                    f"{30 * 86400}x130"),
            _series('net_reset_scheduled_run_success{host="controller"}', "1x30 0x100"),
            _series('gateway_live_workers{job="service",host="gateway-0",model="net-test-chat"}',
                    "1x30 0x100"),
            _series('gateway_live_workers{job="service",host="gateway-0",model="net-test-embed"}',
                    "2x130"),
            _series('indexer_lag_blocks{job="service",host="indexer-0"}', "3x30 0+2x100"),
            # Settled every so often until 30 s (back to 0), then only growing.
            _series('gateway_settlement_backlog_receipts{job="service",host="gateway-0"}',
                    "0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1 2 0 1+1x200"),
            _series('attestation_issue_errors_total{job="service",host="attestation-0",'
                    'reason="chain_unavailable"}', "0x30 1x100"),
        ],
        "alert_rule_test": [
            {"eval_time": "25s", "alertname": "ServiceNotReady", "exp_alerts": []},
            # Never back to 0 from 31 s: the window (60 blocks), then the for: (60 blocks).
            {"eval_time": "85s", "alertname": "SettlementBacklogGrowing", "exp_alerts": []},
            {"eval_time": "160s", "alertname": "SettlementBacklogGrowing", "exp_alerts": [{
                "exp_labels": {"job": "service", "host": "gateway-0", "severity": "warning"},
                "exp_annotations": {"summary": "gateway-0: the settlement backlog grows (at"
                                               " least 70 paid receipts unsettled)"}}]},
            {"eval_time": "25s", "alertname": "AttestationIssueErrors", "exp_alerts": []},
            {"eval_time": "35s", "alertname": "AttestationIssueErrors", "exp_alerts": [{
                "exp_labels": {"job": "service", "host": "attestation-0",
                               "reason": "chain_unavailable", "severity": "warning"},
                "exp_annotations": {"summary": "attestation-0: attest requests failed"
                                               " (chain_unavailable)"}}]},
            {"eval_time": "60s", "alertname": "ServiceNotReady", "exp_alerts": [{"exp_labels": {
                "job": "ready", "host": "faucet-0", "service": "faucet", "severity": "critical"},
                "exp_annotations": {"summary": "faucet-0: /ready fails"}}]},
            {"eval_time": "100s", "alertname": "PublicEndpointDown", "exp_alerts": []},
            {"eval_time": "25s", "alertname": "FaucetFewDripsLeft", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "FaucetFewDripsLeft", "exp_alerts": [{
                "exp_labels": {"job": "service", "host": "faucet-0", "severity": "warning"},
                "exp_annotations": {"summary": "faucet-0: 99 drips left (fewer than 100)"}}]},
            {"eval_time": "25s", "alertname": "Http5xxRate", "exp_alerts": []},
            {"eval_time": "90s", "alertname": "Http5xxRate", "exp_alerts": [{"exp_labels": {
                "host": "gateway-0", "service": "gateway", "severity": "warning"},
                "exp_annotations": {"summary": "gateway-0: 33.33% of requests answer 5xx"}}]},
            {"eval_time": "10s", "alertname": "TlsCertificateExpiring", "exp_alerts": [{
                "exp_labels": {"job": "public", "instance": "https://a/ready",
                               "severity": "warning"},
                "exp_annotations": {"summary": "https://a/ready: the certificate expires in"
                                               " 12d 23h 59m 50s"}}]},
            {"eval_time": "25s", "alertname": "GatewayNoLiveWorker", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "GatewayNoLiveWorker", "exp_alerts": [{
                "exp_labels": {"job": "service", "host": "gateway-0", "model": "net-test-chat",
                               "severity": "warning"},
                "exp_annotations": {"summary": "gateway-0: no live worker serves net-test-chat"}}]},
            # Above 20 blocks behind from 42 s, then 10 blocks of for:.
            {"eval_time": "45s", "alertname": "IndexerLagging", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "IndexerLagging", "exp_alerts": [{
                "exp_labels": {"job": "service", "host": "indexer-0", "severity": "warning"},
                "exp_annotations": {"summary": "indexer-0: the index is 58 blocks behind the"
                                               " chain"}}]},
            {"eval_time": "20s", "alertname": "ScheduledResetFailed", "exp_alerts": []},
            {"eval_time": "40s", "alertname": "ScheduledResetFailed", "exp_alerts": [{
                "exp_labels": {"host": "controller", "severity": "critical"},
                "exp_annotations": {"summary": "controller: the last scheduled reset cycle"
                                               " failed"}}]},
        ],
    }]
    proc = _promtool_test(tmp_path, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
