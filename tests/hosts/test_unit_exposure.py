"""Every systemd unit the suite installs, measured with `systemd-analyze security` on a systemd
test host: each stays at exposure "OK" or better (docs/hardening.md records the scores); the
operator's worker unit is the one `ops-tools operator onboard` writes."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2
import pytest

from ops_tools.operator import units as operator_units
from ops_tools.operator.context import Options
from tests.ansible.test_rendered import _render
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

GOOD_ENOUGH = {"OK", "SAFE", "PERFECT"}
RESET_UNIT = ROOT / "roles/reset_scheduler/templates/etc/systemd/system/net-reset-cycle.service.j2"
# Every public service's unit comes from the service role's one template (roles/service); the
# service roles set its name (the indexer two of them) and nothing that changes the sandbox.
SERVICE_UNIT = ROOT / "roles/service/templates/etc/systemd/system/net-service.service.j2"
SERVICES = ["faucet", "attestation", "explorer", "indexer", "indexer-processor", "gateway",
            "worker"]


def _reset_unit(out: Path) -> Path:
    text = jinja2.Template(RESET_UNIT.read_text()).render(
        ansible_managed="managed by the test", reset_scheduler_name="net-reset-cycle",
        reset_scheduler_ref="main", reset_scheduler_user="netops",
        reset_scheduler_group="netops", reset_scheduler_state_dir="/var/lib/net-reset",
        reset_scheduler_wrapper_path="/usr/local/bin/net-reset-cycle",
        reset_scheduler_timeout_sec=3600,
    )
    path = out / "net-reset-cycle.service"
    path.write_text(text)
    return path


def _service_unit(out: Path, name: str) -> Path:
    # A systemd unit, not HTML: nothing to escape.
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701
    env.filters["quote"] = lambda s: shlex.quote(str(s))
    root = f"/var/lib/net/{name}"
    user = f"net-{name}"
    text = env.from_string(SERVICE_UNIT.read_text()).render(
        service_name=name, service_manage_user=True, service_user=user, service_group=user,
        service_state_base="/var/lib/net", service_visible_dir=root,
        service_executable=f"/opt/net/venv/bin/net-{name}",
        service_config_path=f"{root}/{name}.yml",
        service_environment={}, service_shutdown_timeout=10, service_root_dir=root,
        service_manifest_path=f"{root}/service.json",
        # The operator's worker under systemd notifies a watchdog (playbooks/operator_worker.yml).
        service_systemd_watchdog_sec=120 if name == "worker" else 0,
    )
    path = out / f"net-{name}.service"
    path.write_text(text)
    return path


def _operator_worker_unit(out: Path) -> Path:
    """The unit `ops-tools operator onboard` writes on an operator's server (as
    playbooks/operator_worker.yml runs it: as the inventory's default net-worker user)."""
    state = Path("/var/lib/net/operator/operator")
    opts = Options(name="operator", state_dir=state, keystore_dir=state / "keystore",
                   passphrase_file=None, rpc_url="ws://127.0.0.1:9944", faucet_url="",
                   attestation_url="", gateway_url="", service_user="net-worker",
                   worker_executable=Path("/opt/net/venv/bin/net-worker"))
    path = out / f"{opts.program}.service"
    path.write_text(operator_units.systemd_unit(opts))
    return path


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("units")
    _render(out)
    return [out / "net-node.service", _reset_unit(out),
            *(_service_unit(out, name) for name in SERVICES), _operator_worker_unit(out)]


def test_every_unit_is_ok_or_better(units: list[Path], testhosts) -> None:
    host = testhosts("alpha", "beta").hosts[1]
    scores = {}
    for unit in units:
        host.put(unit, f"/etc/systemd/system/{unit.name}", mode="0644")
    assert host.ssh("sudo systemctl daemon-reload").returncode == 0
    for unit in units:
        proc = host.ssh(f"systemd-analyze security --no-pager {unit.name}")
        assert proc.returncode == 0, proc.stderr
        last = proc.stdout.strip().splitlines()[-1]
        assert f"exposure level for {unit.name}:" in last, last
        score, level = last.split()[-3:-1]
        scores[unit.name] = (float(score), level)
    print(scores)
    bad = {u: s for u, s in scores.items() if s[1] not in GOOD_ENOUGH}
    assert not bad, f"units above OK: {bad}"
