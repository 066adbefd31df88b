"""The monitoring on the real local network (``ops-tools localnet up``, under the machine-wide
lock): every scrape target up, the rules loaded, and stopping authority-1 makes the finality
alert fire in Alertmanager, reach the webhook receiver, and resolve once it runs again.

The times to fire and to resolve are printed (``-s``), never asserted: docs/monitoring.md."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ops_tools.deploy.paths import supervisor_conf
from ops_tools.deploy.supervisor_rpc import Supervisor
from ops_tools.monitoring.alerts import firing_alerts, wait_for_alert
from ops_tools.monitoring.receiver import read_deliveries
from tests.localnet import ops

pytestmark = pytest.mark.slow


def get(url: str) -> dict:
    # The shared network's Prometheus shares the machine with the whole suite: a question, not
    # its speed, is under test.
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def localnet(shared_localnet):
    net = shared_localnet()  # the default network, shared with other modules: leave it healthy
    return net.env, net.up, net.state


def supervisor(state: Path) -> Supervisor:
    # Over its socket, in this process: a supervisorctl is a Python start-up.
    return Supervisor(supervisor_conf(state))


def test_up_names_prometheus_and_alertmanager(localnet):
    _, up, _ = localnet
    assert up["monitoring"] == {"prometheus_url": "http://127.0.0.1:9190",
                                "alertmanager_url": "http://127.0.0.1:9193"}


def test_every_target_is_up_and_the_rules_are_loaded(localnet):
    _, up, _ = localnet
    prom = up["monitoring"]["prometheus_url"]
    deadline = time.monotonic() + 90
    while True:
        targets = get(f"{prom}/api/v1/targets?state=active")["data"]["activeTargets"]
        down = [(t["labels"].get("job"), t["scrapeUrl"], t["health"], t["lastError"])
                for t in targets if t["health"] != "up"]
        probes_ok = get(f"{prom}/api/v1/query?query=probe_success")["data"]["result"]
        failed = [p["metric"]["instance"] for p in probes_ok if p["value"][1] != "1"]
        if (not down and not failed and probes_ok) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert not down, down
    assert probes_ok and not failed, failed
    hosts = {(t["labels"]["job"], t["labels"].get("host")) for t in targets}
    for host in ("authority-0", "authority-1", "rpc-0"):
        assert ("node", host) in hosts
    # The public services (the docs site is nginx, no platform service: probed as public).
    for svc in (s for s in up["services"] if s["service"] != "docs"):
        assert ("service", svc["host"]) in hosts and ("ready", svc["host"]) in hosts
    assert {t["labels"]["job"] for t in targets} >= {"public", "public_rpc"}
    rules = get(f"{prom}/api/v1/rules")["data"]["groups"]
    loaded = {r["name"] for g in rules for r in g["rules"]}
    assert {"FinalityStalled", "BestBlockStalled", "NodeDown", "NodesOnDifferentGenesis",
            "ServiceNotReady", "FaucetFewDripsLeft"} <= loaded
    assert all(r["health"] == "ok" for g in rules for r in g["rules"])


def query(prom: str, expr: str) -> list[dict]:
    return get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]


def test_the_metrics_the_rules_read_are_served(localnet):
    _, up, _ = localnet
    prom = up["monitoring"]["prometheus_url"]
    deadline = time.monotonic() + 60
    exprs = {
        "genesis": 'count by (genesis_hash) (net_node_genesis_info{job="node"})',
        "drips": "faucet_balance_plancks / faucet_drip_plancks",
        "workers": 'gateway_live_workers{job="service"}',
        "lag": 'indexer_lag_blocks{job="service"}',
    }
    while True:
        got = {k: query(prom, e) for k, e in exprs.items()}
        if all(got.values()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    # One genesis, served by all three nodes.
    assert [r["value"][1] for r in got["genesis"]] == ["3"]
    assert got["genesis"][0]["metric"]["genesis_hash"] == up["genesis_hash"]
    assert float(got["drips"][0]["value"][1]) > 100
    # The development worker serves the priced test models.
    assert {r["metric"]["model"]: int(r["value"][1]) for r in got["workers"]}["net-test-chat"] >= 1
    assert got["lag"] and int(got["lag"][0]["value"][1]) >= 0


def test_authority_down_fires_the_finality_alert_and_it_resolves(localnet):
    env, up, state = localnet
    am = up["monitoring"]["alertmanager_url"]
    assert not [a for a in firing_alerts(am) if a.name == "FinalityStalled"]
    # Only what this fault caused counts: not earlier deliveries in the receiver's file, nor
    # alerts resolved before it.
    deliveries = state / "monitoring-0" / "receiver" / "deliveries.jsonl"
    earlier = len(read_deliveries(deliveries))
    stopped_at = time.time()
    supervisor(state).stop("net-node-authority-1")
    stopped = time.monotonic()
    try:
        fired = wait_for_alert(am, "FinalityStalled", timeout_s=300)
        during = ops("alerts", "--json", env=env)
        assert during.returncode == 0, during.stderr[-3000:]
        assert any(a["alertname"] == "FinalityStalled"
                   for a in json.loads(during.stdout)["firing"])
        # The receiver gets the notification (the webhook of the local inventory) while the
        # stall lasts: at once for a new alert group, at the group's next interval (1 min) when
        # an earlier stall (the drills, on the shared network) left the group in place.
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            names = {(a["labels"]["alertname"], a["status"]) for d in
                     read_deliveries(deliveries)[earlier:] for a in d["payload"]["alerts"]}
            if ("FinalityStalled", "firing") in names:
                break
            time.sleep(2)
        assert ("FinalityStalled", "firing") in names
    finally:
        supervisor(state).start("net-node-authority-1")
    started = time.monotonic()
    resolved = wait_for_alert(am, "FinalityStalled", timeout_s=300, resolved=True)
    print(f"\nFinalityStalled fired {fired:.1f} s after authority-1 stopped; resolved"
          f" {resolved:.1f} s after it started again (stopped for {started - stopped:.1f} s)")
    after = ops("alerts", "--json", env=env)
    assert after.returncode == 0, after.stderr[-3000:]
    listed = json.loads(after.stdout)
    assert any(a["alertname"] == "FinalityStalled" and a["last_firing"] >= stopped_at
               for a in listed["resolved"])


def test_second_up_changes_nothing(localnet):
    env, _, _ = localnet
    start = time.monotonic()
    again = ops("localnet", "up", "--json", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    print(f"\nno-change localnet up with the monitoring: {time.monotonic() - start:.1f} s")
    assert json.loads(again.stdout)["changed"] == 0
