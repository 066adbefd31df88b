"""Operator onboarding without a network: GPU detection through the lspci / nvidia-smi test
doubles (fake_tools/), the parsers, the journal's resume rules, the service definitions."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ops_tools.errors import OpsError
from ops_tools.operator import gpu, gpu_probe, service_user, units
from ops_tools.operator.context import Context, Options
from ops_tools.operator.journal import Journal
from ops_tools.operator.report import heartbeat_state
from ops_tools.operator.steps import gpu as gpu_step

FAKES = Path(__file__).parent / "fake_tools"


def tool_output(kind: str, *argv: str) -> str:
    return subprocess.run([str(FAKES / kind / argv[0]), *argv[1:]], capture_output=True,
                          text=True, check=True).stdout


@pytest.fixture
def fake_path(monkeypatch):
    def use(kind: str) -> None:
        monkeypatch.setenv("PATH", f"{FAKES / kind}{os.pathsep}{os.environ['PATH']}")
    return use


def options(tmp_path: Path, **kw) -> Options:
    base = dict(name="op1", state_dir=tmp_path / "state", keystore_dir=tmp_path / "ks",
                passphrase_file=None, rpc_url="ws://127.0.0.1:9", faucet_url="http://127.0.0.1:9",
                attestation_url="http://127.0.0.1:9", gateway_url="http://127.0.0.1:9")
    return Options(**{**base, **kw})


# --- GPU detection through the test doubles --------------------------------------------------

@pytest.mark.process
def test_h100_is_detected_with_model_memory_driver_and_cc_mode(fake_path, tmp_path):
    fake_path("h100")
    found = gpu_probe.detect(no_gpu=False)
    assert [(d.slot, d.vendor_id, d.device_id) for d in found.pci] == [("17:00.0", "10de", "2331")]
    assert [(g.name, g.memory_mib, g.driver_version) for g in found.gpus] == [
        ("NVIDIA H100 PCIe", 81559, "550.54.15")]
    assert found.cc_mode == "on"
    assert gpu.same_bus(found.pci[0].slot, found.gpus[0].pci_bus_id)
    journal = Journal(path=tmp_path / "j.json", name="op1")
    outcome = gpu_step.run(Context(options(tmp_path), journal))
    assert "NVIDIA H100 PCIe" in outcome.detail and outcome.facts["gpu"]["no_gpu"] is False


@pytest.mark.process
def test_no_gpu_stops_with_that_message(fake_path):
    fake_path("none")
    with pytest.raises(OpsError, match="no NVIDIA GPU found") as err:
        gpu_probe.detect(no_gpu=False)
    assert "--no-gpu" in str(err.value)


def test_no_gpu_flag_records_a_worker_without_gpu(fake_path, tmp_path):
    fake_path("none")
    outcome = gpu_step.run(Context(options(tmp_path, no_gpu=True),
                                   Journal(path=tmp_path / "j.json", name="op1")))
    assert outcome.facts["gpu"] == {"no_gpu": True, "pci_devices": [], "gpus": [],
                                    "cc_mode": "unknown"}


@pytest.mark.process
def test_gpu_without_driver_names_the_driver(tmp_path, monkeypatch):
    # lspci of the H100 server, nvidia-smi of a machine without the driver loaded.
    mixed = tmp_path / "bin"
    mixed.mkdir()
    (mixed / "lspci").symlink_to(FAKES / "h100" / "lspci")
    (mixed / "nvidia-smi").symlink_to(FAKES / "none" / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{mixed}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(OpsError, match=r"lists 1 NVIDIA GPU.*install the NVIDIA driver"):
        gpu_probe.detect(no_gpu=False)


# --- the parsers -----------------------------------------------------------------------------

@pytest.mark.process
@pytest.mark.parametrize("kind,count", [("h100", 1), ("none", 0)])
def test_lspci_nn_and_mm_agree(kind, count):
    nn = gpu.nvidia_gpus(gpu.parse_lspci_nn(tool_output(kind, "lspci", "-nn")))
    mmnn = gpu.nvidia_gpus(gpu.parse_lspci_mm(tool_output(kind, "lspci", "-mm", "-nn")))
    assert len(nn) == len(mmnn) == count
    for a, b in zip(nn, mmnn, strict=True):
        assert (a.slot, a.class_id, a.vendor_id, a.device_id) == \
               (b.slot, b.class_id, b.vendor_id, b.device_id)
        assert a.device_name == b.device_name == "GH100 [H100 PCIe]"


@pytest.mark.process
def test_lspci_mm_without_ids_goes_by_names():
    devices = gpu.parse_lspci_mm(tool_output("h100", "lspci", "-mm"))
    assert len(devices) == 4
    assert [d.slot for d in gpu.nvidia_gpus(devices)] == ["17:00.0"]


def test_nvidia_audio_function_and_other_vendors_are_not_gpus():
    text = ('17:00.1 "Audio device [0403]" "NVIDIA Corporation [10de]" "Device [22bb]" -ra1\n'
            '18:00.0 "3D controller [0302]" "Advanced Micro Devices, Inc. [AMD/ATI] [1002]"'
            ' "Aldebaran/MI200 [740c]" -r01\n')
    assert gpu.nvidia_gpus(gpu.parse_lspci_mm(text)) == []


def test_nvidia_smi_csv_several_gpus_and_units():
    text = ("index, pci.bus_id, name, memory.total [MiB], driver_version\n"
            "0, 00000000:17:00.0, NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\n"
            "1, 00000000:2A:00.0, NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\n")
    gpus = gpu.parse_nvidia_smi_csv(text)
    assert [(g.index, g.pci_bus_id, g.memory_mib) for g in gpus] == [
        (0, "00000000:17:00.0", 81559), (1, "00000000:2A:00.0", 81559)]
    with pytest.raises(ValueError, match=r"no column .pci\.bus_id."):
        gpu.parse_nvidia_smi_csv("index, name\n0, x\n")


def test_cc_status():
    assert gpu.parse_cc_status("CC status: ON\n") == "on"
    assert gpu.parse_cc_status("CC status: OFF") == "off"
    assert gpu.parse_cc_status("Invalid combination of input arguments.") == "unknown"


# --- the journal -----------------------------------------------------------------------------

def test_journal_resumes_and_keeps_one_record_per_step(tmp_path):
    path = tmp_path / "journal.json"
    journal = Journal.open(path, "op1")
    assert journal.bind_network("0x" + "11" * 32)
    rec = journal.begin("gpu")
    journal.finish(rec, "none", {"gpu": {"no_gpu": True}})
    journal.begin("wallet")  # the process dies here
    again = Journal.open(path, "op1")
    assert again.done("gpu") and not again.done("wallet")
    rec = again.begin("wallet")
    again.finish(rec, "created", {"account": "5F..."})
    data = json.loads(path.read_text())
    assert [(s["name"], s["status"], s["attempts"]) for s in data["steps"]] == [
        ("gpu", "done", 1), ("wallet", "done", 2)]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_journal_of_another_network_is_moved_aside_keeping_the_machines_account(tmp_path):
    path = tmp_path / "journal.json"
    journal = Journal.open(path, "op1")
    journal.bind_network("0x" + "11" * 32)
    journal.finish(journal.begin("wallet"), "created", {"account": "5F...",
                                                        "mnemonic_backup": "/b"})
    journal.finish(journal.begin("stake"), "registered", {"registered_at": 31})
    fresh = Journal.open(path, "op1")
    assert not fresh.bind_network("0x" + "22" * 32)
    # The account is the machine's: kept (and checked), never created again after a reset.
    assert [s.name for s in fresh.steps] == ["wallet"]
    assert fresh.facts == {"account": "5F...", "mnemonic_backup": "/b"}
    assert Journal.open(path, "op1").genesis_hash == "0x" + "22" * 32
    assert (tmp_path / f"journal.0x{'11' * 32}.json").exists()


def test_journal_of_another_operator_is_refused(tmp_path):
    Journal.open(tmp_path / "journal.json", "op1")
    with pytest.raises(OpsError, match="operator 'op1'"):
        Journal.open(tmp_path / "journal.json", "op2")


# --- service definitions ---------------------------------------------------------------------

def test_systemd_unit_is_hardened_with_a_watchdog(tmp_path):
    opts = options(tmp_path, service_user="net")
    unit = units.systemd_unit(opts)
    for line in ("Type=notify", "NotifyAccess=main", f"WatchdogSec={units.WATCHDOG_SEC}",
                 "Restart=always", "NoNewPrivileges=true", "ProtectSystem=strict",
                 "CapabilityBoundingSet=", f"ReadWritePaths={opts.state_dir}", "User=net",
                 # What the onboarding wrote as root goes to the worker's user before it starts.
                 f"ExecStartPre=+/bin/chown -R net:net {opts.state_dir} {opts.keystore_dir}"):
        assert line in unit.splitlines()
    assert f"--config {opts.state_dir / 'worker.yml'}" in unit


def test_the_service_managers_stop_timeout_outlasts_the_workers_drain(tmp_path):
    """systemd and supervisord kill a stopping worker only after its drain and its shutdown
    after the drain (10 s): a stream in flight at systemctl stop runs to its end."""
    import yaml

    opts = options(tmp_path)
    drain = yaml.safe_load(units.worker_config(opts, "0x" + "ab" * 32, tmp_path / "pp"))[
        "drain_timeout_s"]
    unit = units.systemd_unit(opts).splitlines()
    stop = int(next(x for x in unit if x.startswith("TimeoutStopSec=")).split("=")[1])
    assert stop > drain + 10
    program = units.supervisor_program(options(tmp_path, service_manager="supervisor"))
    wait = int(next(x for x in program.splitlines() if x.startswith("stopwaitsecs="))
               .split("=")[1])
    assert wait > drain + 10


def test_the_worker_runs_as_its_own_unprivileged_user_unless_root_is_asked_for(tmp_path):
    default = units.systemd_unit(options(tmp_path)).splitlines()
    assert "User=net-worker" in default and "Group=net-worker" in default
    assert any(line.startswith("ExecStartPre=+/bin/chown -R net-worker:net-worker")
               for line in default)
    asked = units.systemd_unit(options(tmp_path, service_user="root"))
    assert "User=" not in asked and "chown" not in asked
    # supervisord's programs run as the supervisord's user unless one is named.
    assert "user=" not in units.supervisor_program(options(tmp_path, service_manager="supervisor"))
    named = options(tmp_path, service_manager="supervisor", service_user="nobody")
    assert "user=nobody" in units.supervisor_program(named).splitlines()


@pytest.fixture
def open_dir():
    """A directory other users may pass through (pytest's base directory is 0700)."""
    made = Path(tempfile.mkdtemp(prefix="net-open-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)


def test_a_directory_the_worker_user_cannot_reach_is_refused_before_anything_is_written(
        tmp_path, open_dir):
    closed = open_dir / "home"
    closed.mkdir(mode=0o700)
    opts = options(tmp_path, service_user="nobody", state_dir=closed / "state",
                   keystore_dir=open_dir / "ks")
    assert service_user.closed_parent(opts.state_dir) == closed
    with pytest.raises(OpsError) as refused:
        service_user.prepare(opts, lambda _m: None)
    assert f"--state-dir {closed / 'state'}" in str(refused.value)
    assert "nobody cannot reach it" in str(refused.value) and "--service-user root" in str(
        refused.value)
    assert not (closed / "state").exists()
    service_user.prepare(options(tmp_path, service_user="nobody", state_dir=open_dir / "state",
                                 keystore_dir=open_dir / "ks"), lambda _m: None)
    # The playbook's layout: a private (0700) state directory holding the keystore; the unit
    # hands the state directory to the worker's user, so only the parents above it count.
    private = open_dir / "private-state"
    private.mkdir(mode=0o700)
    service_user.prepare(options(tmp_path, service_user="nobody", state_dir=private,
                                 keystore_dir=private / "keystore"), lambda _m: None)
    with pytest.raises(OpsError, match="--service-user no-such-user-x: no such user"):
        service_user.prepare(options(tmp_path, service_user="no-such-user-x"), lambda _m: None)


def test_worker_config_names_secret_files_never_their_content(tmp_path):
    opts = options(tmp_path, models=["m1"])
    text = units.worker_config(opts, "0x" + "ab" * 32, tmp_path / "pp")
    assert "passphrase_file: " + str(tmp_path / "pp") in text
    assert "account: op1" in text and "engine_url: test" in text
    program = units.supervisor_program(opts)
    assert "[program:net-worker-op1]" in program and "autorestart=true" in program


def test_heartbeat_state():
    assert heartbeat_state(None, 5) == "never"
    assert heartbeat_state(5, 5) == "current"
    assert heartbeat_state(4, 5).startswith("behind by 1")
    assert heartbeat_state(1, 5).startswith("behind by 4 epochs")


@pytest.mark.process
def test_gpu_check_redoes_the_detection_when_the_gpus_are_gone(fake_path, tmp_path):
    """The journal records the H100; the server now shows none (or another answer): the check
    names it and the step is run again (which then stops with the detection's own error)."""
    fake_path("h100")
    journal = Journal(path=tmp_path / "j.json", name="op1")
    ctx = Context(options(tmp_path), journal)
    journal.finish(journal.begin("gpu"), "1 GPU", gpu_step.run(ctx).facts)
    assert gpu_step.check(ctx) is None
    fake_path("none")
    assert "no NVIDIA GPU found" in gpu_step.check(ctx)
    ctx_no_gpu = Context(options(tmp_path, no_gpu=True), journal)
    assert "differ from the journal's" in gpu_step.check(ctx_no_gpu)


def test_until_names_a_step(tmp_path):
    from ops_tools.errors import InputError
    from ops_tools.operator import runner

    with pytest.raises(InputError, match="--until: 'deamon' is not a step"):
        runner.onboard(options(tmp_path), display=None, until="deamon")  # type: ignore[arg-type]
    assert not (tmp_path / "state").exists()  # refused before anything is written


def test_a_worker_deployed_by_the_role_is_read_from_its_manifest(tmp_path):
    """The daemon step acts on the program roles/worker's manifest names, and says what to do
    when there is none."""
    from ops_tools.operator.steps import daemon

    manifest = tmp_path / "service.json"
    with pytest.raises(OpsError, match="converge it with roles/worker first"):
        daemon._deployed(manifest)
    manifest.write_text("[]")
    with pytest.raises(OpsError, match="not a mapping"):
        daemon._deployed(manifest)
    manifest.write_text(json.dumps({"program": {
        "manager": "systemd", "name": "net-worker-op1",
        "commands": {"status": ["systemctl", "is-active", "net-worker-op1.service"]}}}))
    program = daemon._deployed(manifest)
    assert (program.name, program.status_argv()) == (
        "net-worker-op1", ["systemctl", "is-active", "net-worker-op1.service"])


@pytest.mark.process
def test_a_role_deployed_worker_and_a_container_are_refused_together(tmp_path):
    """--worker-manifest names a worker that roles/worker runs; --container asks the onboarding
    to run one of its own: both at once is refused before anything is written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ops-tools")),
         "operator", "onboard", "--name", "op1", "--state-dir", str(tmp_path / "state"),
         "--test-engine", "--container", "--worker-manifest", str(tmp_path / "service.json"),
         "--yes"], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode != 0
    assert "--worker-manifest / --container: give one" in proc.stderr + proc.stdout
    assert not (tmp_path / "state").exists()


def test_the_state_directory_stays_private_and_passable(tmp_path):
    from ops_tools.operator import runner

    opts = options(tmp_path)
    runner.prepare(opts)
    assert stat.S_IMODE(opts.state_dir.stat().st_mode) == 0o700
    opts.state_dir.chmod(0o711)  # as the playbook sets it: the worker's user passes through
    opts.secrets_dir.chmod(0o711)
    runner.prepare(opts)
    assert stat.S_IMODE(opts.state_dir.stat().st_mode) == 0o711
    assert stat.S_IMODE(opts.secrets_dir.stat().st_mode) == 0o700
    opts.state_dir.chmod(0o755)  # listable by others: tightened
    runner.prepare(opts)
    assert stat.S_IMODE(opts.state_dir.stat().st_mode) == 0o700


def test_a_longer_drain_moves_every_stop_timeout_with_it(tmp_path):
    """--drain-timeout: the worker's settings, the unit, the program and the container's stop
    timeout all follow it, so no manager kills a worker that is still draining."""
    import yaml

    from ops_tools.containers.run import default_stop_timeout
    from ops_tools.operator import container

    opts = options(tmp_path, drain_timeout_s=900)
    assert yaml.safe_load(units.worker_config(opts, "0x" + "ab" * 32, tmp_path / "pp"))[
        "drain_timeout_s"] == 900
    assert f"TimeoutStopSec={900 + units.AFTER_DRAIN_S}" in units.systemd_unit(opts).splitlines()
    program = units.supervisor_program(options(tmp_path, service_manager="supervisor",
                                               drain_timeout_s=900))
    assert f"stopwaitsecs={900 + units.AFTER_DRAIN_S}" in program.splitlines()
    boxed = options(tmp_path, drain_timeout_s=900, container=True)
    assert yaml.safe_load(container.worker_config(boxed, "0x" + "ab" * 32))[
        "drain_timeout_s"] == 900
    assert container.spec(boxed).create_kwargs()["stop_timeout"] == \
        default_stop_timeout(900)


@pytest.mark.parametrize(("args", "named"), [
    (["--drain-timeout", "0"], "--drain-timeout: 0: give seconds from 1 to 3600"),
    (["--drain-timeout", "3601"], "--drain-timeout: 3601"),
    (["--drain-timeout", "90", "--worker-manifest", "/nonexistent/service.json"],
     "worker_drain_timeout_s"),
])
def test_a_drain_out_of_bounds_or_beside_roles_worker_is_refused(args, named, capsys, tmp_path):
    from ops_tools.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["operator", "onboard", "--name", "op1", "--test-engine", "--no-gpu", "--yes",
              "--state-dir", str(tmp_path / "state"), *args])
    assert exit_.value.code == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "state").exists()
