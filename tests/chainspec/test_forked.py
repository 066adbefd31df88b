"""A forked worker of the large-genesis paths: its result, its exception, or its death as one error.

Deaths are injected by wrapping the function a worker runs so that it kills its own process when
it runs in the child (the parent's pid differs), the way the OOM killer would end it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ops_tools.chainspec import forked, genesis, trie, trie_bulk
from ops_tools.chainspec.runtime import RuntimeVersion, api, build_runtime_blob
from ops_tools.chainspec.trie import trie_root
from ops_tools.errors import InputError, OpsError
from tests.chainspec.reference_trie import reference_root

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_workers_result_comes_back():
    assert forked.collect(forked.run_forked(lambda: {"pid": os.getpid()}))["pid"] != os.getpid()


def test_a_workers_exception_is_raised_in_the_parent():
    def job() -> None:
        raise InputError("key 0x00 appears twice")

    with pytest.raises(InputError, match="appears twice"):
        forked.collect(forked.run_forked(job))


@pytest.mark.parametrize(
    ("job", "says"),
    [(_kill_self, "was killed by SIGKILL"), (lambda: os._exit(3), "exited with status 3")],
)
def test_a_dead_worker_is_an_ops_error(job, says):
    worker = forked.run_forked(job)
    with pytest.raises(OpsError, match=says) as caught:
        forked.collect(worker)
    assert f"pid {worker.pid}" in str(caught.value)
    with pytest.raises(ChildProcessError):
        os.waitpid(worker.pid, os.WNOHANG)  # already reaped: no zombie left behind


def _dies_in_the_child(monkeypatch, module: object, name: str) -> None:
    real = getattr(module, name)
    parent = os.getpid()

    def wrapper(*args, **kwargs):
        if os.getpid() != parent:
            _kill_self()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_the_trie_fails_cleanly_when_its_second_half_dies(monkeypatch):
    monkeypatch.setattr(trie, "BULK_MIN_KEYS", 8)
    monkeypatch.setattr(trie_bulk, "PARALLEL_MIN_KEYS", 40)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    rng = random.Random(1)
    entries = {rng.randbytes(48): rng.randbytes(80) for _ in range(200)}
    assert trie_root(entries, 1) == reference_root(entries, 1)  # the split path, working
    _dies_in_the_child(monkeypatch, trie_bulk, "_children")
    with pytest.raises(OpsError, match=r"genesis worker .* was killed by SIGKILL"):
        trie_root(entries, 1)


# The command in a fresh process, its thresholds lowered so that a small spec is forked over,
# and the function named on its command line (if any) made to die in the worker.
_COMMAND = textwrap.dedent(
    """
    import os, signal, sys
    from ops_tools.chainspec import forked, genesis, spec_scan, trie, trie_bulk
    from ops_tools.cli.main import main

    spec, *target = sys.argv[1:]
    if target:
        module = {"spec_scan": spec_scan, "trie_bulk": trie_bulk}[target[0]]
        real, parent = getattr(module, target[1]), os.getpid()

        def wrapper(*args, **kwargs):
            if os.getpid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        setattr(module, target[1], wrapper)
    trie.BULK_MIN_KEYS, genesis.SCAN_AT_LEAST = 8, 0
    trie_bulk.VECTOR_MIN_KEYS, trie_bulk.PARALLEL_MIN_KEYS = 2, 10
    forked.can_fork = lambda: True
    main(["chainspec", "genesis-hash", spec])
    """
)


def _genesis_hash(spec: Path, *target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _COMMAND, str(spec), *target],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _spec(tmp_path: Path) -> Path:
    rng = random.Random(2)
    top = {"0x" + rng.randbytes(48).hex(): "0x" + rng.randbytes(80).hex() for _ in range(300)}
    runtime = RuntimeVersion("net-dev", "net-dev-node", 1, 6, 1, 1, 1, [api("Core", 5)])
    top["0x3a636f6465"] = "0x" + build_runtime_blob(runtime).hex()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"name": "T", "id": "t", "genesis": {"raw": {"top": top}}}))
    return path


@pytest.mark.parametrize(
    ("module", "name"), [("spec_scan", "_decode_spans"), ("trie_bulk", "_children")]
)
def test_the_command_reports_a_dead_worker_in_one_line(tmp_path, module, name):
    path = _spec(tmp_path)
    healthy = _genesis_hash(path)
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.strip() == "0x" + genesis.genesis_of_file(path).genesis_hash.hex()
    result = _genesis_hash(path, module, name)
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: a forked genesis worker (pid ")
    assert "killed by SIGKILL" in lines[0] and "dmesg" in lines[0]
