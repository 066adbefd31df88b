"""``ops-tools operator onboard --model-path``: a GGUF file the onboarding serves with llama.cpp's
server (net-local-engine) beside the worker; its refusals before anything is done; and the
operator inventory's engine variables as the playbook hands them to the onboarding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ops_tools.errors import InputError
from ops_tools.operator import units
from ops_tools.operator.context import Options
from ops_tools.worker import config, local_engine

OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
ROOT = Path(__file__).resolve().parents[2]
GGUF = b"GGUF" + bytes(60)  # the magic is what the checks read; the real model: tests/inference


def onboard(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
    return subprocess.run(
        [str(OPS_TOOLS), "operator", "onboard", "--name", "op1", "--state-dir",
         str(tmp_path / "state"), "--yes", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env)


@pytest.mark.process
@pytest.mark.parametrize(("make", "args", "named"), [
    (None, ["--model-path", "{tmp}/missing.gguf"], "'{tmp}/missing.gguf': no such file"),
    (None, ["--model-path", "{tmp}"], "'{tmp}': a directory"),
    (b"<html>not a model</html>", ["--model-path", "{tmp}/model.gguf"],
     "'{tmp}/model.gguf': not a GGUF file"),
    (GGUF, ["--model-path", "{tmp}/model.gguf", "--engine-url", "http://127.0.0.1:1"],
     "--engine-url / --model-path / --test-engine: give exactly one"),
    (GGUF, ["--model-path", "{tmp}/model.gguf", "--engine-kind", "vllm"],
     "--engine-kind: 'vllm' with --model-path"),
    (GGUF, ["--model-path", "{tmp}/model.gguf", "--engine-port", "70000"],
     "--engine-port: 70000"),
], ids=["missing", "directory", "not-gguf", "two-engines", "other-kind", "bad-port"])
def test_onboard_refuses_a_bad_model_path_before_doing_anything(tmp_path, make, args, named):
    if make is not None:
        (tmp_path / "model.gguf").write_bytes(make)
    proc = onboard(tmp_path, *(a.format(tmp=tmp_path) for a in args))
    assert proc.returncode != 0
    assert named.format(tmp=tmp_path) in proc.stderr + proc.stdout
    assert not (tmp_path / "state").exists()


def _options(tmp_path: Path, **kw) -> Options:
    model = tmp_path / "my-model.Q4.gguf"
    model.write_bytes(GGUF)
    base = dict(name="op1", state_dir=tmp_path / "state", keystore_dir=tmp_path / "ks",
                passphrase_file=None, rpc_url="ws://127.0.0.1:9",
                faucet_url="http://127.0.0.1:9", attestation_url="http://127.0.0.1:9",
                gateway_url="http://127.0.0.1:9", engine_url="http://127.0.0.1:8190",
                engine_kind="llamacpp", model_path=model, engine_port=8190)
    return Options(**{**base, **kw})


def test_the_model_file_goes_to_the_engine_and_its_tokenizer_to_the_worker(tmp_path):
    opts = _options(tmp_path)
    (tmp_path / "worker.yml").write_text(units.worker_config(opts, "0x" + "ab" * 32,
                                                             tmp_path / "pp"))
    worker = config.load(tmp_path / "worker.yml", {})
    assert (worker.engine_kind, worker.engine_url) == ("llamacpp", "http://127.0.0.1:8190")
    assert worker.engine_model_path == opts.model_path

    (tmp_path / "engine.yml").write_text(units.engine_config(opts))
    engine = local_engine.load(tmp_path / "engine.yml")
    argv = local_engine.command(engine, engine.model_path)
    assert argv[argv.index("--model") + 1] == str(opts.model_path)
    assert argv[argv.index("--model_alias") + 1] == "my-model.Q4"
    assert argv[argv.index("--port") + 1] == "8190"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "gemma" not in argv  # the file's own chat template, not the packaged model's

    named = _options(tmp_path, models=["my-model"])
    (tmp_path / "engine.yml").write_text(units.engine_config(named))
    engine = local_engine.load(tmp_path / "engine.yml")
    argv = local_engine.command(engine, engine.model_path)
    assert argv[argv.index("--model_alias") + 1] == "my-model"


@pytest.mark.parametrize("manager", ["systemd", "supervisor"])
def test_the_engine_runs_as_its_own_program_beside_the_worker(tmp_path, manager):
    opts = _options(tmp_path, service_manager=manager,
                    supervisor_conf=tmp_path / "supervisord.conf")
    text = (units.engine_systemd_unit(opts) if manager == "systemd"
            else units.engine_supervisor_program(opts))
    engine_exe = opts.worker_executable.with_name("net-local-engine")
    assert f"{engine_exe} --config {opts.state_dir / 'engine.yml'}" in text
    if manager == "supervisor":
        assert "[program:net-engine-op1]" in text
    else:
        assert "User=net-worker" in text and "Before=net-worker-op1.service" in text


def test_a_model_file_the_engine_cannot_read_is_refused_by_the_engine_settings(tmp_path):
    (tmp_path / "engine.yml").write_text(yaml.safe_dump({
        "kind": "llamacpp", "listen_port": 8190, "model_path": str(tmp_path / "gone.gguf")}))
    with pytest.raises(InputError) as caught:
        local_engine.load(tmp_path / "engine.yml")
    assert f"model_path: '{tmp_path / 'gone.gguf'}'" in str(caught.value)
    assert "no such file" in str(caught.value)


FAKE_OPS_TOOLS = """#!/bin/sh
# TEST DOUBLE of ops-tools on the "host": records the argv the playbook passes, answers as the
# onboarding's --json report does.
printf '%s\\n' "$@" > "$(dirname "$0")/../argv"
echo '{"ran": [], "account": "5F", "models": []}'
"""


@pytest.mark.process
@pytest.mark.parametrize(("engine_vars", "expected", "absent"), [
    ({"operator_model_path": "/srv/models/m.gguf", "operator_engine_port": 8191},
     ["--model-path", "/srv/models/m.gguf", "--engine-port", "8191"], ["--engine-url"]),
    ({"operator_engine_url": "http://127.0.0.1:8000", "operator_engine_kind": "vllm"},
     ["--engine-url", "http://127.0.0.1:8000", "--engine-kind", "vllm"], ["--model-path"]),
    ({}, ["--engine-url", "http://127.0.0.1:8000"], ["--engine-kind", "--model-path"]),
])
def test_the_inventorys_engine_variables_reach_the_onboarding(tmp_path, engine_vars, expected,
                                                              absent):
    """playbooks/operator_worker.yml's chain steps (--tags chain: the onboarding up to the
    stake; the worker's converge is roles/worker's, tested in its scenarios) with
    inventories/operator's group variables (the example's defaults) and this host's engine
    variables over them."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "ops-tools"
    fake.write_text(FAKE_OPS_TOOLS)
    fake.chmod(0o755)
    host = {"ansible_connection": "local", "ansible_become": False,
            "ansible_python_interpreter": sys.executable,
            "operator_passphrase": "pp", "operator_venv": str(venv),
            "operator_state_dir": str(tmp_path / "state"), "operator_service_user": "",
            "operator_worker_public_url": "http://127.0.0.1:8101", **engine_vars}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump(
        {"all": {"children": {"operator_workers": {"hosts": {"gpu-0": host}}}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "NET_"))}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventories/operator",
         "-i", str(inventory), "--limit", "gpu-0", "--tags", "chain",
         "playbooks/operator_worker.yml"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    argv = (venv / "argv").read_text().splitlines()
    assert argv[argv.index("--until") + 1] == "stake", argv
    for flag, value in zip(expected[::2], expected[1::2], strict=True):
        assert argv[argv.index(flag) + 1] == value, argv
    for flag in absent:
        assert flag not in argv, argv
