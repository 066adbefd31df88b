"""Stopping and starting a program through its service manager (``ops_tools.programs``), on
this machine or on its remote host (``backup.hostio``), idempotently: a stopped program stays
stopped, a running one is not started twice."""

from __future__ import annotations

from ops_tools.backup.hostio import LOCAL, HostIO
from ops_tools.errors import OpsError
from ops_tools.programs import Program


def running(program: Program, io: HostIO = LOCAL) -> bool:
    proc = io.program(program, "status" if program.supervisor else "is-active")
    return program.running(proc.stdout)


def _act(program: Program, action: str, io: HostIO) -> None:
    proc = io.program(program, action)
    if proc.returncode != 0:
        raise OpsError(f"{io.where}: {' '.join(program.argv(action))} failed:"
                       f" {(proc.stdout + proc.stderr).strip()[-300:]}")


def stop(program: Program, io: HostIO = LOCAL) -> None:
    if running(program, io):
        _act(program, "stop", io)


def start(program: Program, io: HostIO = LOCAL) -> None:
    if not running(program, io):
        _act(program, "start", io)
