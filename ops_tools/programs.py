"""A long-running program as its deployed manifest names it: started, stopped, restarted and
asked for its status through its service manager (supervisor or systemd).

The manifests that the service role's converge module writes for every program it runs
(``program: {manager, name, supervisor_conf, commands: {start, stop, restart, status}}``: the
nodes, the platform services, the docs site, monitoring, the worker), a staged service's pending
start, and the worker that onboarding installs all name their program this way; a node manifest
of an older role names it in ``service: {manager, name, supervisor_conf}``. The reset cycle,
the drills, backups and onboarding act on programs through this one module. Commands come as
an argv (to run here) or as a shell line (to run on a host over its connection); every shell
line is idempotent, so that a resumed run may repeat it.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.errors import InputError

MANAGERS = ("supervisor", "systemd")


@dataclass(frozen=True)
class Program:
    manager: str  # supervisor | systemd
    name: str  # the supervisor program, or the systemd unit without ".service"
    supervisor_conf: str = ""  # the supervisord.conf whose supervisord runs it
    # The commands the deployed manifest records, (action, argv) each: those are run as given.
    commands: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.manager not in MANAGERS:
            raise InputError(f"service manager {self.manager!r} of {self.name!r} is not one of"
                             f" {', '.join(MANAGERS)}; re-converge the host with its role")
        if self.manager == "supervisor" and not self.supervisor_conf:
            raise InputError(f"program {self.name!r}: supervisor without a supervisor_conf;"
                             " re-converge the host with its role")

    @classmethod
    def of(cls, service: Mapping[str, Any]) -> Program:
        """The program a manifest's ``service`` record (or a pending start) names."""
        try:
            recorded = service.get("commands") or {}
            if not isinstance(recorded, Mapping) or not all(
                    isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                    for argv in recorded.values()):
                raise TypeError
            commands = tuple(sorted((str(action), tuple(argv))
                                    for action, argv in recorded.items()))
            return cls(str(service["manager"]), str(service["name"]),
                       str(service.get("supervisor_conf") or ""), commands)
        except (KeyError, TypeError, AttributeError):
            raise InputError(f"a deployed manifest's program record {dict(service)!r} lacks its"
                             " manager or name, or a command is not a list of words;"
                             " re-converge the host with its role") from None

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], where: str = "manifest") -> Program:
        """The program a deployed manifest records: ``program`` (the converge module's) or
        the node role's ``service`` record."""
        record = manifest.get("program")
        if not isinstance(record, Mapping):
            record = manifest.get("service")
        if not isinstance(record, Mapping):
            raise InputError(f"{where}: records no program (neither 'program' nor a 'service'"
                             " mapping); re-converge the host with its role")
        return cls.of(record)

    @property
    def supervisor(self) -> bool:
        return self.manager == "supervisor"

    @property
    def unit(self) -> str:
        return f"{self.name}.service"

    def argv(self, action: str, *, local: bool = False) -> list[str]:
        """The command the manifest records for ``action``, else ``supervisorctl -c CONF
        action NAME`` or ``systemctl action NAME.service``; with ``local``, supervisorctl is
        the one beside this Python when there is one."""
        recorded = dict(self.commands).get(action)
        if recorded is None:
            recorded = (["supervisorctl", "-c", self.supervisor_conf, action, self.name]
                        if self.supervisor else ["systemctl", action, self.unit])
        argv = list(recorded)
        if local and argv[0] == "supervisorctl":
            beside = Path(sys.executable).with_name(argv[0])
            argv[0] = str(beside) if beside.exists() else (shutil.which(argv[0]) or argv[0])
        return argv

    def status_argv(self, *, local: bool = False) -> list[str]:
        """The command whose output ``running`` reads: the recorded ``status``, else
        supervisorctl status or systemctl is-active."""
        if "status" in dict(self.commands) or self.supervisor:
            return self.argv("status", local=local)
        return self.argv("is-active", local=local)

    def _sh(self, action: str) -> str:
        return shlex.join(self.argv(action))

    def _is_running(self) -> str:
        # supervisorctl status exits 0 only for a RUNNING program; systemctl is-active likewise
        return f"{shlex.join(self.status_argv())} >/dev/null 2>&1"

    def _tolerating(self, action: str, done: str) -> str:
        # One supervisorctl, not a status call first: inside a reset's downtime each is a Python
        # start-up. Some versions exit non-zero on "ERROR (already started)" or "ERROR (not
        # running)" (4.2 exits 0): that answer is the wanted state; any other failure is said.
        return (f'out=$({self._sh(action)} 2>&1) || case "$out" in *"ERROR ({done})"*) ;;'
                f' *) printf "%s\\n" "$out" >&2; false ;; esac')

    def stop(self) -> str:
        """Stop it; a stopped program stays stopped (supervisorctl answers a stop of a stopped
        program with an error)."""
        if self.supervisor:
            return self._tolerating("stop", "not running")
        return self._sh("stop")

    def start(self) -> str:
        """Start it; a started program is left alone (supervisorctl answers "already
        started" with an error)."""
        if self.supervisor:
            return self._tolerating("start", "already started")
        return self._sh("start")

    def restart(self) -> str:
        """Start a program that is down; restart one that runs (it may not answer)."""
        if self.supervisor:
            return f"if {self._is_running()}; then {self._sh('restart')}; else" \
                   f" {self._sh('start')}; fi"
        return self._sh("restart")

    def apply(self, reload: bool) -> str:
        """Restart it on files just written: with ``reload``, the manager reads its program or
        unit first (supervisorctl update restarts a changed program and starts a new one)."""
        if self.supervisor:
            ctl = shlex.join(["supervisorctl", "-c", self.supervisor_conf])
            restart = f"{ctl} restart {shlex.quote(self.name)} >/dev/null"
            if not reload:
                return restart
            # update says nothing when the program's file did not change: the restart is due.
            return (f'out=$({ctl} update {shlex.quote(self.name)}) && case "$out" in'
                    f' *"process group"*) ;; *) {restart} ;; esac')
        restart = f"systemctl enable {shlex.quote(self.unit)} &&" \
                  f" systemctl restart {shlex.quote(self.unit)}"
        return f"systemctl daemon-reload && {restart}" if reload else restart

    def running(self, status_stdout: str) -> bool:
        """Whether the output of ``status_argv()`` says it runs."""
        words = status_stdout.split()
        return "RUNNING" in words if self.supervisor else words == ["active"]
