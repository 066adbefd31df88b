"""The llamacpp worker image, built here (debootstrap base + docker import, wheels collected on
this machine), run by ``ops-tools operator onboard --container`` as an onboarded operator's
worker on a test network (``onboard_stacks.ports_stack``: a development node, faucet,
attestation and gateway on free loopback ports), in a Docker daemon of the test's own.

Through the gateway with the ``openai`` SDK: a chat completion answered by the container's
Gemma 3 270M; the container runs unprivileged on a read-only root file system and reports
healthy; ``docker stop`` drains it: a stream in flight when SIGTERM arrives completes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import docker.errors
import openai
import pytest
import yaml

from ops_tools.containers import images
from ops_tools.containers import run as containers
from ops_tools.worker.local_engine import gemma_model
from tests.conftest import ROOT, free_port
from tests.containers.dockerd import dockerd
from tests.operator.conftest import ONBOARD_PASSPHRASE, RECAP
from tests.operator.onboard_stacks import BIN, ports_stack

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docker"), pytest.mark.timeout(3600)]
NAME = "opc"
MODEL = "gemma-3-270m"


@pytest.fixture(scope="module")
def docker_client():
    with dockerd() as client:
        yield client


@pytest.fixture(scope="module")
def image(docker_client, tmp_path_factory) -> images.Built:
    started = time.monotonic()
    built = images.build(docker_client, "llamacpp", tmp_path_factory.mktemp("image"))
    print(f"\nnet-worker:llamacpp built in {time.monotonic() - started:.0f} s")
    return built


@pytest.fixture(scope="module")
def onboarded(docker_client, image, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("containers")
    model = gemma_model(tmp / "model")
    (tmp / "net").mkdir()
    # The gateway's own default worker TTL (60 s): the test gateway's 15 s equals the worker's
    # announcement interval, and a worker whose announcement is a tick late drops out for a
    # moment (a real model's request may fall into that moment).
    with ports_stack(tmp / "net", ONBOARD_PASSPHRASE) as net:
        # The supervisor's options are the stack's; a container needs none of them.
        extra = net["onboard_extra"]
        cut = extra.index("--service-manager")
        extra = extra[:cut] + extra[cut + 4:]
        worker_port = net["worker_port"]
        args = [str(BIN / "ops-tools"), "operator", "onboard", "--name", NAME,
                "--passphrase-file", str(net["pass"]), "--no-gpu", "--yes", "--json",
                "--state-dir", str(tmp / "state"), *extra,
                "--container", "--image", image.tag, "--docker-host", docker_client.base_url,
                "--engine-port", str(free_port()), "--model-path", str(model), "--model", MODEL,
                # A drain that outlasts the slowest stream a loaded machine gives (the 60 s
                # default once cut one in CI, after 31 of 40 tokens); tests/worker tests the bound.
                "--drain-timeout", "600", "--timeout", "600"]
        started = time.monotonic()
        done = subprocess.run(args, capture_output=True, text=True, env=net["env"], cwd=ROOT,
                              timeout=1800, check=False)
        print(f"onboard --container: {time.monotonic() - started:.0f} s")
        container = None
        with contextlib.suppress(docker.errors.NotFound):  # the assertion below says why
            container = docker_client.containers.get(f"net-worker-{NAME}")
        logs = container.logs().decode(errors="replace")[-3000:] if container else ""
        assert done.returncode == 0, f"{done.stderr[-3000:]}\ncontainer log:\n{logs}"
        report = json.loads(done.stdout)
        assert worker_port  # the container listens on the stack's worker port
        yield {"net": net, "report": report, "container": container, "state": tmp / "state",
               "model": model}


@pytest.fixture(scope="module")
def gateway(onboarded) -> openai.OpenAI:
    net = onboarded["net"]
    return openai.OpenAI(base_url=net["gateway"] + "/v1", api_key=net["gateway_key"],
                         max_retries=0, timeout=300)


def test_chat_completion_through_the_gateway(onboarded, gateway):
    raw = gateway.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "The capital of France is"}],
        max_tokens=16, temperature=0)
    answer = raw.parse()
    assert raw.headers["x-net-operator"] == onboarded["report"]["account"]
    # Which words is the model's business, and the CPU's: the GGUF is the base model with no
    # chat template (llama-cpp-python's fallback format), and at temperature 0 its answer is a
    # phrase on one machine and a lone newline on another (an AVX2 EPYC). That the worker's
    # engine answered, and counted, is the path's.
    choice = answer.choices[0]
    assert choice.finish_reason in ("stop", "length") and choice.message.content
    assert answer.usage.completion_tokens > 0


def exec_status(container, script: str, timeout: float = 120) -> int:
    """The exit status of ``sh -c script`` in the container. Only the status: docker's exec
    now and then loses a short command's output (moby#27289, docker-py#2042), so what the
    container holds is read from this machine's side instead (``processes``)."""
    api = container.client.api
    exec_id = api.exec_create(container.id, ["sh", "-c", script])["Id"]
    api.exec_start(exec_id, detach=True)
    deadline = time.monotonic() + timeout
    while (state := api.exec_inspect(exec_id))["Running"] or state["ExitCode"] is None:
        assert time.monotonic() < deadline, f"{script!r} still runs after {timeout:g} s"
        time.sleep(0.2)
    return int(state["ExitCode"])


def processes(container) -> dict[Path, dict[str, bytes]]:
    """What this machine's ``/proc`` shows of each process in the container (docker top): its
    status, mountinfo, environ and cmdline. A process that ended in between (a health check's)
    is left out."""
    top = container.top()
    column = top["Titles"].index("PID")
    seen = {}
    for row in top["Processes"]:
        proc = Path("/proc") / str(row[column])
        try:
            seen[proc] = {name: (proc / name).read_bytes()
                          for name in ("status", "mountinfo", "environ", "cmdline")}
        except (FileNotFoundError, ProcessLookupError):
            continue
    return seen


def test_unprivileged_read_only_healthy_and_no_secret_in_env(onboarded):
    container = onboarded["container"]
    container.reload()
    config, host = container.attrs["Config"], container.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["NetworkMode"] == "host"
    procs = processes(container)
    assert procs, "docker top lists no process of the container"
    for proc, files in procs.items():  # every process runs as the image's user, none as root
        uids = next(line for line in files["status"].decode().splitlines()
                    if line.startswith("Uid:")).split()[1:]
        assert set(uids) == {config["User"].split(":")[0]} and "0" not in uids, (proc, uids)
        root_mount = next(line.split() for line in files["mountinfo"].decode().splitlines()
                          if line.split()[4] == "/")
        assert "ro" in root_mount[5].split(","), (proc, root_mount)
    assert exec_status(container, "echo x > /opt/net-worker/x") != 0
    assert exec_status(container, "echo x > /tmp/x") == 0
    # Configuration and secrets only as mounted files: nothing of them in the environment or
    # the command line of any process.
    passphrase = ONBOARD_PASSPHRASE.encode()
    assert passphrase not in json.dumps(container.attrs).encode()
    seen = b"".join(files["environ"] + files["cmdline"] for files in procs.values())
    assert b"net-worker" in seen  # the worker's own command line was read
    assert passphrase not in seen
    # The model file alone (not its directory), where the worker's settings name it.
    model_inside = f"/models/{onboarded['model'].name}"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert set(mounts) == {"/etc/net-worker", "/run/secrets/passphrase", model_inside}
    assert all(not m["RW"] for m in mounts.values())
    settings = yaml.safe_load(Path(mounts["/etc/net-worker"]["Source"], "worker.yml").read_text())
    assert settings["engine_model_path"] == model_inside
    # The stop chain: docker stop waits longer than the worker drains, and the shutdown after.
    assert config["StopTimeout"] >= settings["drain_timeout_s"] + containers.AFTER_DRAIN_S
    deadline = time.monotonic() + 180
    while container.attrs["State"]["Health"]["Status"] != "healthy":
        assert time.monotonic() < deadline, container.attrs["State"]["Health"]
        time.sleep(3)
        container.reload()


def test_docker_stop_drains_a_stream_in_flight(onboarded, gateway):
    container = onboarded["container"]
    stream = gateway.completions.create(model=MODEL, prompt="Once upon a time, in a village",
                                        max_tokens=40, temperature=0, stream=True,
                                        stream_options={"include_usage": True})
    # 40 tokens: a stream still running when SIGTERM comes after the first, and well within the
    # fixture's drain even with the container held to 5 % of a core (190 s for the 40 seen).
    chunks = iter(stream)
    first = next(chunks)
    stopped: list[BaseException] = []

    def stop() -> None:
        try:
            container.stop()  # the container's own stop timeout (the daemon's, not the SDK's)
        except BaseException as exc:
            stopped.append(exc)

    stopper = threading.Thread(target=stop)
    stopper.start()
    text, usage, finish = first.choices[0].text if first.choices else "", None, None
    after_stop = 0  # text chunks that came after docker stop was asked
    try:
        for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].text
                finish = chunk.choices[0].finish_reason or finish
                after_stop += 1
            if chunk.usage is not None:
                usage = chunk.usage
    except openai.APIError as exc:
        # The stream was cut: what the worker and its engine said about it is in the container's
        # log (the stop may still be waiting for it to exit).
        stopper.join(300)
        logs = container.logs().decode(errors="replace")
        pytest.fail(f"the stream was cut after {after_stop} chunks since docker stop: {exc}\n"
                    f"so far: {text!r}\ncontainer log:\n{logs[-6000:]}")
    stopper.join(300)
    assert not stopper.is_alive() and not stopped, stopped
    container.reload()
    logs = container.logs().decode(errors="replace")
    # SIGTERM came while the stream was in flight, and the stream still ran to its end: no
    # bound of the stop chain (the drain's, docker stop's) cut it.
    assert "draining: 1 request(s) in flight" in logs, logs[-3000:]
    assert "drained in" in logs, logs[-3000:]
    assert "drain timeout" not in logs, logs[-3000:]
    assert after_stop > 0
    assert finish in ("stop", "length")
    assert text and usage is not None and usage.completion_tokens > 0
    # Every token the usage counts reached the client (the stream was not cut before its end).
    assert usage.completion_tokens == 40 or finish == "stop"
    assert container.attrs["State"]["Status"] == "exited"
    assert container.attrs["State"]["ExitCode"] == 0, logs[-3000:]


def _role(tmp: Path, docker_client, net: dict, image: str, *flags: str,
          extra: dict | None = None, fails: bool = False) -> dict[str, int] | str:
    """roles/worker's container entry point on this machine (connection local); ``fails``:
    the run must fail, and its output is returned."""
    playbook = tmp / "container.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"ansible.builtin.include_role": {"name": "net.ops.worker",
                                                    "tasks_from": "container"}}]}]))
    variables = tmp / "vars.json"
    variables.write_text(json.dumps({
        "worker_container_image": image, "worker_container_name": "net-worker-role",
        "worker_container_dir": str(tmp / "deployed"), "worker_engine_url": "test",
        "worker_listen_port": ROLE_PORT, "worker_dev_suri": "//RoleWorker",
        "worker_gateway_url": net["gateway"], "worker_rpc_url": net["rpc_ws"],
        "worker_container_docker_host": docker_client.base_url,
        "worker_ops_tools_executable": str(BIN / "ops-tools"),
        "ansible_python_interpreter": sys.executable, **(extra or {})}))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", str(playbook), "-e",
         f"@{variables}", *flags], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**net["env"], "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}, check=False)
    if fails:
        assert done.returncode != 0, done.stdout[-3000:]
        # The YAML result format wraps long messages and doubles single quotes: one line.
        return " ".join((done.stdout + done.stderr).replace("''", "'").split())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "RoleWorker" not in done.stdout  # the secret stays out of the output
    match = RECAP.search(done.stdout)
    assert match, done.stdout[-2000:]
    return {"changed": int(match["changed"])}


ROLE_PORT = free_port()


def test_the_worker_role_runs_the_container_idempotently(onboarded, docker_client, image,
                                                          tmp_path):
    net = onboarded["net"]
    assert _role(tmp_path, docker_client, net, image.tag, "--check")["changed"] > 0
    with pytest.raises(docker.errors.NotFound):  # check mode changed nothing
        docker_client.containers.get("net-worker-role")
    assert _role(tmp_path, docker_client, net, image.tag)["changed"] > 0
    container = docker_client.containers.get("net-worker-role")
    try:
        deadline = time.monotonic() + 120
        while True:  # the worker in front of its built-in test engine answers
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"http://127.0.0.1:{ROLE_PORT}/v1/models", timeout=5) as response:
                assert response.status == 200
                break
            assert time.monotonic() < deadline, container.logs()[-2000:]
            time.sleep(2)
        secret = tmp_path / "deployed" / "secrets" / "dev_suri"
        assert secret.stat().st_mode & 0o777 == 0o600
        assert secret.stat().st_uid == int(container.attrs["Config"]["User"].split(":")[0])
        first_id = container.id
        assert _role(tmp_path, docker_client, net, image.tag)["changed"] == 0
        assert _role(tmp_path, docker_client, net, image.tag, "--check")["changed"] == 0
        assert docker_client.containers.get("net-worker-role").id == first_id
    finally:
        container.remove(force=True)


def _get(url: str, data: dict | None = None, timeout: float = 5) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(data).encode() if data is not None else None,
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def test_the_worker_role_gives_the_container_a_model_file(onboarded, docker_client, image,
                                                          tmp_path):
    """worker_engine_model_path: the host's GGUF file mounted read-only, served by the llamacpp
    variant's own llama.cpp engine, its tokenizer the worker's; a bad path is refused before
    anything is written, naming the variable, the value and what to do."""
    net, model = onboarded["net"], onboarded["model"]
    worker_port, engine_port = free_port(), free_port()
    base = {"worker_container_name": "net-worker-model", "worker_listen_port": worker_port,
            "worker_engine_url": f"http://127.0.0.1:{engine_port}", "worker_models": [MODEL]}
    for bad, why in ((tmp_path / "nowhere.gguf", "no such file on this host"),
                     (tmp_path, "not a regular file"),
                     (ROOT / "pyproject.toml", "not a GGUF file")):
        out = _role(tmp_path, docker_client, net, image.tag,
                    extra={**base, "worker_engine_model_path": str(bad)}, fails=True)
        assert f"worker_engine_model_path: '{bad}': {why}" in out, out[-3000:]
        assert "give the absolute path of a GGUF model file" in out
    assert not (tmp_path / "deployed").exists()  # refused before anything was written
    out = _role(tmp_path, docker_client, net, image.tag, fails=True, extra={
        **base, "worker_engine_model_path": str(model), "worker_container_stop_timeout_s": 90})
    assert "worker_container_stop_timeout_s: 90" in out and "at least the drain" in out

    _role(tmp_path, docker_client, net, image.tag,
          extra={**base, "worker_engine_model_path": str(model)})
    container = docker_client.containers.get("net-worker-model")
    try:
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        inside = f"/models/{model.name}"
        assert mounts[inside]["Source"] == str(model) and not mounts[inside]["RW"]
        assert container.attrs["Config"]["StopTimeout"] == 120
        deadline = time.monotonic() + 600
        while True:  # the worker, once its engine loaded the model, lists it
            with contextlib.suppress(OSError, ValueError):
                listed = _get(f"http://127.0.0.1:{worker_port}/v1/models")
                if MODEL in {m["id"] for m in listed["data"]}:
                    break
            assert time.monotonic() < deadline, container.logs()[-3000:]
            container.reload()
            assert container.status == "running", container.logs()[-3000:]
            time.sleep(3)
        # The container's engine serves the host's real file: real text from Gemma 3 270M.
        answer = _get(f"http://127.0.0.1:{engine_port}/v1/completions",
                      {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8,
                       "temperature": 0}, timeout=300)
        assert answer["choices"][0]["text"].strip() and answer["usage"]["completion_tokens"] > 0
        settings = yaml.safe_load((tmp_path / "deployed" / "config" / "worker.yml").read_text())
        assert settings["engine_model_path"] == inside
        assert settings["engine_kind"] == "llamacpp"
    finally:
        container.remove(force=True)
