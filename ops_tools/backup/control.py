"""Stopping and starting a program of this machine through its service manager
(``ops_tools.programs``), idempotently: a stopped program stays stopped, a running one is not
started twice."""

from __future__ import annotations

import subprocess

from ops_tools.errors import OpsError
from ops_tools.programs import Program

TIMEOUT_S = 120


def _run(program: Program, action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(program.argv(action, local=True), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def running(program: Program) -> bool:
    proc = _run(program, "status" if program.supervisor else "is-active")
    return program.running(proc.stdout)


def _act(program: Program, action: str) -> None:
    proc = _run(program, action)
    if proc.returncode != 0:
        raise OpsError(f"{' '.join(program.argv(action))} failed:"
                       f" {(proc.stdout + proc.stderr).strip()[-300:]}")


def stop(program: Program) -> None:
    if running(program):
        _act(program, "stop")


def start(program: Program) -> None:
    if not running(program):
        _act(program, "start")
