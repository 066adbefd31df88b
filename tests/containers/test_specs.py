"""The pure parts of the container deployment, without Docker: what the container is given
(read-only mounts, no environment, no command line), what the entry point starts, and the
onboarding's files for a container."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from ops_tools.containers import images
from ops_tools.containers import run as containers
from ops_tools.containers.run import WorkerContainer
from ops_tools.errors import InputError
from ops_tools.operator import container
from ops_tools.operator.context import Options
from ops_tools.worker import config as worker_config
from ops_tools.worker import container as entry


def test_the_container_gets_files_only_read_only_and_no_environment(tmp_path):
    spec = WorkerContainer(name="net-worker-op", image="net-worker:llamacpp",
                           config_dir=tmp_path / "config",
                           secrets={"passphrase": tmp_path / "secrets" / "passphrase"},
                           model_dir=tmp_path / "models", drain_timeout_s=60)
    kwargs, host = spec.create_kwargs(), spec.host_config()
    assert "environment" not in kwargs and "command" not in kwargs
    assert host["read_only"] is True and host["network_mode"] == "host"
    assert kwargs["user"] == "10001:10001"
    assert host["cap_drop"] == ["ALL"] and host["security_opt"] == ["no-new-privileges"]
    assert set(host["tmpfs"]) == {"/tmp"}
    assert {v["bind"] for v in host["binds"].values()} == {
        "/etc/net-worker", "/run/secrets/passphrase", "/models"}
    assert all(v["mode"] == "ro" for v in host["binds"].values())
    # docker stop waits for the drain, the worker's shutdown and the engine's own stop.
    assert kwargs["stop_timeout"] >= 60 + containers.AFTER_DRAIN_S


def test_a_model_file_is_mounted_alone_read_only(tmp_path):
    model = tmp_path / "models" / "gemma.gguf"
    spec = WorkerContainer(name="w", image="net-worker:llamacpp", config_dir=tmp_path / "c",
                           model_file=model)
    binds = spec.host_config()["binds"]
    assert binds[str(model)] == {"bind": "/models/gemma.gguf", "mode": "ro"}
    assert str(model.parent) not in binds  # nothing else of its directory
    assert spec.model_in_container() == "/models/gemma.gguf"
    with pytest.raises(InputError, match="model directory or a model file"):
        WorkerContainer(name="w", image="i", config_dir=tmp_path / "c", model_file=model,
                        model_dir=tmp_path / "models")


def test_the_stop_timeout_is_longer_than_the_drain_it_waits_for(tmp_path):
    def spec(**kw):
        return WorkerContainer(name="w", image="i", config_dir=tmp_path, **kw)

    # The default follows the drain, whatever it is.
    for drain in (1, 60, 300.5):
        stop = spec(drain_timeout_s=drain).create_kwargs()["stop_timeout"]
        assert stop >= drain + containers.AFTER_DRAIN_S
    assert spec(drain_timeout_s=60, stop_timeout_s=100).create_kwargs()["stop_timeout"] == 100
    # A stop timeout that would kill a worker still draining is refused, saying why.
    with pytest.raises(InputError, match=r"stop timeout 90 s: .*at least .*100 s"):
        spec(drain_timeout_s=60, stop_timeout_s=90)
    with pytest.raises(InputError, match="at most 7200"):
        spec(drain_timeout_s=60, stop_timeout_s=10**6)


def _deploy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "worker.yml").write_text("{}\n")
    return subprocess.run(
        [str(Path(sys.executable).with_name("ops-tools")), "containers", "deploy", "--name",
         "w", "--config-dir", str(tmp_path / "config"), "--docker-host",
         f"unix://{tmp_path}/no.sock", *args], capture_output=True, text=True, timeout=120,
        check=False)


@pytest.mark.process  # ops-tools as a subprocess
def test_deploy_refuses_a_bad_stop_timeout_or_model_file_before_docker(tmp_path):
    """Each refusal names the option, the value and what to do, exits 2, and comes before the
    daemon is asked (there is none at that socket)."""
    done = _deploy(tmp_path, "--drain-timeout", "60", "--stop-timeout", "90")
    assert done.returncode == 2, done.stderr
    assert "--stop-timeout: 90" in done.stderr and "at least" in done.stderr
    done = _deploy(tmp_path, "--drain-timeout", "0")
    assert done.returncode == 2 and "--drain-timeout: 0" in done.stderr
    missing = tmp_path / "nowhere.gguf"
    done = _deploy(tmp_path, "--model-file", str(missing))
    assert done.returncode == 2 and f"--model-file: '{missing}': no such file" in done.stderr
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    done = _deploy(tmp_path, "--model-file", str(not_gguf))
    assert done.returncode == 2 and "not a GGUF file" in done.stderr
    done = _deploy(tmp_path, "--model-file", str(not_gguf), "--model-dir", str(tmp_path))
    assert done.returncode == 2 and "--model-dir / --model-file" in done.stderr
    # A good file passes the checks and the daemon is asked next (it is not there).
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    done = _deploy(tmp_path, "--model-file", str(model))
    assert done.returncode == 1 and "cannot reach the Docker daemon" in done.stderr


def test_engine_plan_defaults_to_the_local_engine_and_checks_argv(tmp_path):
    plan = tmp_path / "engine.yml"
    plan.write_text(yaml.safe_dump({"kind": "llamacpp", "listen_port": 8120}))
    argv, timeout = entry.engine_plan(plan)
    assert Path(argv[0]).name == "net-local-engine" and argv[1:] == ["--config", str(plan)]
    assert timeout == 600
    plan.write_text(yaml.safe_dump({"argv": ["vllm", "serve", "/models/m"],
                                    "start_timeout_s": 900}))
    assert entry.engine_plan(plan) == (["vllm", "serve", "/models/m"], 900.0)
    for bad in ({"argv": "vllm serve"}, {"argv": []}, {"argv": [1]},
                {"start_timeout_s": 0}, {"start_timeout_s": 10**6}):
        plan.write_text(yaml.safe_dump(bad))
        with pytest.raises(InputError, match=r"engine\.yml"):
            entry.engine_plan(plan)


def _options(tmp_path: Path, **extra) -> Options:
    return Options(name="op", state_dir=tmp_path / "state", keystore_dir=tmp_path / "ks",
                   passphrase_file=None, rpc_url="ws://127.0.0.1:9944",
                   faucet_url="http://127.0.0.1:8001", attestation_url="http://127.0.0.1:8002",
                   gateway_url="http://127.0.0.1:8005", engine_url="http://127.0.0.1:8120",
                   container=True, **extra)


def test_onboarding_files_point_inside_the_container(tmp_path):
    opts = _options(tmp_path, model_path=tmp_path / "m" / "gemma.gguf", engine_kind="llamacpp")
    out = container.files(opts, "0x" + "ab" * 32, "secret words",
                          {"op.sr25519.json": b"{}", "op.eth.json": b"{}"})
    config_dir = opts.container_dir / "config"
    assert set(out) == {config_dir / "worker.yml", config_dir / "engine.yml",
                        config_dir / "keystore" / "op.sr25519.json",
                        config_dir / "keystore" / "op.eth.json",
                        opts.container_dir / "secrets" / "passphrase"}
    settings = yaml.safe_load(out[config_dir / "worker.yml"])
    assert settings["keystore_dir"] == "/etc/net-worker/keystore"
    assert settings["passphrase_file"] == "/run/secrets/passphrase"
    assert b"secret words" not in out[config_dir / "worker.yml"]
    # The worker counts streamed usage with the mounted file's tokenizer, as on the host.
    assert settings["engine_model_path"] == "/models/gemma.gguf"
    assert settings["engine_kind"] == "llamacpp"
    # The worker accepts it (the model file where the container sees it, here on the host).
    model = tmp_path / "gemma.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    worker_config.WorkerSettings(**{**settings, "engine_model_path": model})
    engine = yaml.safe_load(out[config_dir / "engine.yml"])
    assert engine == {"kind": "llamacpp", "listen_host": "127.0.0.1", "listen_port": 8120,
                      "model_path": "/models/gemma.gguf"}
    spec = container.spec(opts)
    assert spec.model_file == tmp_path / "m" / "gemma.gguf" and spec.model_dir is None
    # docker stop outlasts the drain the worker was told.
    assert spec.create_kwargs()["stop_timeout"] >= \
        settings["drain_timeout_s"] + containers.AFTER_DRAIN_S


def test_a_container_engine_listens_on_loopback(tmp_path):
    opts = _options(tmp_path, model_path=tmp_path / "m.gguf")
    opts.engine_url = "http://10.0.0.5:8120"
    with pytest.raises(InputError, match="--engine-url"):
        container.engine_config(opts)


def test_variants_and_the_pinned_llamacpp():
    assert images.check_variant("vllm") == "vllm"
    with pytest.raises(InputError, match="variant"):
        images.check_variant("ollama")
    assert images.llamacpp_requirement().startswith("llama-cpp-python[server]==")
    dockerfile = (images.DOCKERFILE_DIR / "Dockerfile").read_text()
    for variant in images.VARIANTS:
        assert f" AS {variant}\n" in dockerfile
    # The GPU engines' images are pinned by digest.
    for arg in ("VLLM_IMAGE", "SGLANG_IMAGE", "TRTLLM_IMAGE"):
        line = next(x for x in dockerfile.splitlines() if x.startswith(f"ARG {arg}="))
        assert "@sha256:" in line and len(line.split("@sha256:")[1]) == 64


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        _Health.status = 200


def test_the_health_check_asks_the_worker_where_worker_yml_says_it_listens(tmp_path,
                                                                           health_server):
    port = health_server.server_address[1]
    worker_yml = tmp_path / "worker.yml"
    assert entry.health(tmp_path) == 1  # no settings: not healthy
    wildcard = "0.0.0.0"  # noqa: S104 (written to a settings file; nothing binds it)
    worker_yml.write_text(yaml.safe_dump({"listen_host": wildcard, "listen_port": port}))
    assert entry.health(tmp_path) == 0  # a wildcard address is asked on loopback
    _Health.status = 503  # draining
    assert entry.health(tmp_path) == 1
    _Health.status = 200
    worker_yml.write_text(yaml.safe_dump({"listen_port": "not a port"}))
    assert entry.health(tmp_path) == 1


@pytest.mark.process  # a Python interpreter as a subprocess
def test_the_health_check_does_not_import_the_settings_model():
    """Docker gives the HEALTHCHECK 5 s on a host busy with the engine: the entry point's module
    leaves the settings model (pydantic and the rest) to the launcher."""
    probe = ("import sys, ops_tools.worker.container; print(sorted(m for m in"
             " ('ops_tools.worker.config', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"
