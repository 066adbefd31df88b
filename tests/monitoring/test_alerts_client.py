"""The alert client and ``ops-tools alerts`` against a real Alertmanager and Prometheus (Debian's
binaries on free loopback ports): an alert posted to Alertmanager is seen firing, waited for,
and seen resolved; the CLI reads the URLs from an inventory's monitoring host."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ops_tools.errors import OpsError
from ops_tools.monitoring.alerts import firing, wait_for_alert
from tests.conftest import free_port
from tests.monitoring.conftest import ROOT, tool

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

OPS_TOOLS = Path(sys.executable).with_name("ops-tools")


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{url}: the program exited"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} never got ready")


@pytest.fixture
def monitoring(tmp_path: Path) -> Iterator[tuple[str, str]]:
    am_port, prom_port = free_port(), free_port()
    (tmp_path / "am.yml").write_text("route: {receiver: none}\nreceivers: [{name: none}]\n")
    (tmp_path / "prom.yml").write_text("global: {scrape_interval: 1s}\nscrape_configs: []\n")
    procs = [
        subprocess.Popen([tool("prometheus-alertmanager"), f"--config.file={tmp_path / 'am.yml'}",
                          f"--storage.path={tmp_path / 'am'}", "--cluster.listen-address=",
                          f"--web.listen-address=127.0.0.1:{am_port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([tool("prometheus"), f"--config.file={tmp_path / 'prom.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'prom'}",
                          f"--web.listen-address=127.0.0.1:{prom_port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    try:
        am, prom = f"http://127.0.0.1:{am_port}", f"http://127.0.0.1:{prom_port}"
        _wait_ready(f"{am}/-/ready", procs[0])
        _wait_ready(f"{prom}/-/ready", procs[1])
        yield am, prom
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


STARTED = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)


def _post(am: str, ends_in_s: float) -> None:
    """The alert as Prometheus sends it: firing until endsAt (in the past: resolved)."""
    ends = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=ends_in_s)
    alert = [{"labels": {"alertname": "FinalityStalled", "host": "authority-0"},
              "annotations": {"summary": "authority-0: finality has not advanced"},
              "startsAt": STARTED.isoformat(), "endsAt": ends.isoformat()}]
    req = urllib.request.Request(f"{am}/api/v2/alerts", data=json.dumps(alert).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def test_firing_wait_and_resolve(monitoring) -> None:
    am, _ = monitoring
    assert firing(am, "FinalityStalled") == []
    _post(am, 300)
    assert wait_for_alert(am, "FinalityStalled", {"host": "authority-0"}, timeout_s=30) >= 0
    [alert] = firing(am, "FinalityStalled", {"host": "authority-0"})
    assert alert.summary == "authority-0: finality has not advanced"
    assert firing(am, "FinalityStalled", {"host": "authority-1"}) == []
    with pytest.raises(OpsError, match="did not resolve"):
        wait_for_alert(am, "FinalityStalled", timeout_s=1, resolved=True, poll_s=0.2)
    _post(am, -1)  # ends now: resolved
    wait_for_alert(am, "FinalityStalled", timeout_s=30, resolved=True)


def test_wait_asks_again_when_alertmanager_stalls_and_names_the_stall_at_its_timeout(
        monitoring) -> None:
    """A stall between Alertmanager and the wait (a proxy on loopback that holds the first
    questions past the request timeout): the wait asks again and sees the alert; a stall that
    lasts past the wait's own timeout fails naming the alert and the unanswered question."""
    am, _ = monitoring
    _post(am, 300)
    stalls = {"left": 2}

    class Stalling(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if stalls["left"]:
                stalls["left"] -= 1
                time.sleep(1.5)  # past the wait's request timeout
                return
            with urllib.request.urlopen(am + self.path, timeout=5) as resp:
                body = resp.read()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proxy = f"http://127.0.0.1:{server.server_address[1]}"
        wait_for_alert(proxy, "FinalityStalled", {"host": "authority-0"}, timeout_s=30,
                       poll_s=0.1, request_timeout=0.5)
        assert stalls["left"] == 0  # both stalled questions were asked, and the wait went on
        stalls["left"] = 1000
        with pytest.raises(OpsError, match=r"did not resolve in 2 s .*the last question: .*"
                                           r"does not answer in 0.5 s"):
            wait_for_alert(proxy, "FinalityStalled", timeout_s=2, resolved=True, poll_s=0.1,
                           request_timeout=0.5)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_cli_lists_what_fires_from_the_inventorys_monitoring_host(monitoring, tmp_path) -> None:
    am, prom = monitoring
    _post(am, 300)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"monitoring": {"hosts": {
        "monitoring-0": {"monitoring_prometheus_url": prom,
                         "monitoring_alertmanager_url": am}}}}}}))
    proc = subprocess.run([str(OPS_TOOLS), "alerts", "--inventory", str(inventory), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(a["alertname"], a["state"], a["labels"]["host"]) for a in out["firing"]] == [
        ("FinalityStalled", "firing", "authority-0")]
    assert out["resolved"] == []


def test_cli_names_a_missing_monitoring_host(tmp_path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": {}}}}))
    proc = subprocess.run([str(OPS_TOOLS), "alerts", "--inventory", str(inventory)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 2
    assert "no host in group monitoring" in proc.stderr
