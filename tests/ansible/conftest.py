"""Helpers for the Ansible suite: run ansible tools from the project's virtualenv, colourless,
with the repository's ansible.cfg, and capture their output for failure messages."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ops_tools.deploy.runner import strategy_env
from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
NETWORK_DEF = ROOT / "tests" / "ansible" / "files" / "molecule-net.yml"
# molecule, checking its executor once per run instead of before every playbook (the module says
# why); run from a role's directory as molecule is.
MOLECULE = [sys.executable, str(Path(__file__).with_name("molecule_cli.py"))]


def ansible_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["NO_COLOR"] = "1"
    # A connection's set-up (SSH, sudo, the remote interpreter's start) under Ansible's 10 s:
    # on a loaded two-core machine it once took longer for three test hosts at once.
    env.setdefault("ANSIBLE_TIMEOUT", "60")
    env.update(extra)
    return env


def deploy_env(**extra: str) -> dict[str, str]:
    """``ansible_env`` with the strategy that ops-tools runs the playbooks with (mitogen, unless
    NET_ANSIBLE_STRATEGY=ansible), for the molecule scenarios and the roles' own playbooks: the
    maintainers' deployments run that way, and it halves the processor time of a converge
    (most of CI's). Ansible's own strategy is the operator's
    path: the installed collection under plain ansible-playbook
    (tests/operator/test_full_node_collection.py)."""
    return ansible_env(**strategy_env(None), **extra)


def run(
    cmd: list[str],
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env or ansible_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def selected_roles(request: pytest.FixtureRequest, test: str) -> list[str]:
    """The ``role`` parameters of ``test`` (a function of the requesting module) that this
    session runs: what a module fixture starts ahead of its tests."""
    return [item.callspec.params["role"] for item in request.session.items
            if item.path == request.path and getattr(item, "originalname", "") == test]


def stop_scenarios(pool: ThreadPoolExecutor, runs: dict[str, Future[Any]]) -> None:
    """A scenario fixture's teardown: what has not started never will; what runs is waited for
    (each scenario stops what it started)."""
    for run in runs.values():
        run.cancel()
    pool.shutdown(wait=True)


def molecule_test(scenario: str, role: str, env: dict[str, str], *, timeout: float,
                  log: Path, args: tuple[str, ...] = ()) -> tuple[int, str]:
    """``molecule test -s scenario [args]`` in ``roles/role``: its exit code and its output, the
    steps' INFO lines (stderr) and the plays' output (stdout) in one stream, in order. ``log``
    gets the same lines, each after the seconds since the start, which is where a slow step
    shows."""
    start = time.monotonic()
    proc = subprocess.Popen([*MOLECULE, "test", "-s", scenario, *args],
                            cwd=ROOT / "roles" / role, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.start()
    lines: list[str] = []
    try:
        with log.open("w") as out:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                out.write(f"{time.monotonic() - start:8.1f} {line}")
        returncode = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if expired.is_set():
        raise subprocess.TimeoutExpired(proc.args, timeout, "".join(lines))
    return returncode, "".join(lines)


def tail(proc: subprocess.CompletedProcess[str], lines: int = 60) -> str:
    out = (proc.stdout + "\n" + proc.stderr).splitlines()
    return "\n".join(out[-lines:])


@pytest.fixture(scope="session")
def rendered_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The throwaway network's render output (raw.json, manifest.json), rendered once."""
    out = tmp_path_factory.mktemp("chainspec")
    proc = run(
        [
            str(VENV_BIN / "ops-tools"),
            "chainspec",
            "render",
            "--network",
            str(NETWORK_DEF),
            "--node",
            str(VENV_BIN / "devnode"),
            "--out",
            str(out),
        ]
    )
    assert proc.returncode == 0, tail(proc)
    return out


def molecule_shared(out: Path, *, bundle: bool) -> Path:
    """What every molecule scenario's prepare would make the same (tests/ansible/molecule): the
    throwaway network's chain spec in ``out/chainspec`` and, with ``bundle``, the
    development-node bundle in ``out/net-node`` (its manifest ``out/net-node.json``). The
    scenarios copy them from the directory named in NET_MOLECULE_SHARED."""
    proc = run([str(VENV_BIN / "ops-tools"), "chainspec", "render", "--network", str(NETWORK_DEF),
                "--node", str(VENV_BIN / "devnode"), "--out", str(out / "chainspec")])
    assert proc.returncode == 0, tail(proc)
    if bundle:
        proc = run([str(VENV_BIN / "ops-tools"), "node", "devnode-bundle",
                    "--out", str(out / "net-node"), "--json"])
        assert proc.returncode == 0, tail(proc)
        (out / "net-node.json").write_text(proc.stdout)
    return out


def shutdown_supervisord(root: Path) -> None:
    """Stop the supervisord a test's run of a role started under ``root`` (and its programs)."""
    conf = root / "supervisor" / "supervisord.conf"
    if conf.exists():
        with contextlib.suppress(SupervisorError):  # not running: nothing to stop
            Supervisor(conf).shutdown()
