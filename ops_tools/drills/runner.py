"""A drill's steps on the shared journaled runner (``ops_tools.runbook``): healthy, inject,
detect, remove, recover.

The journal (``<state>/drills/journal.json``, 0600) names the scenario and keeps the facts the
report is made of and those ``remove`` needs. A drill that did not finish (killed, interrupted,
failed after its injection) is finished by the next run before anything else: ``--resume``
stops there and reports it; a new drill then starts on a network checked healthy again. Ctrl-C
and SIGTERM remove the fault on the way out (and the journal says so); only a SIGKILL leaves it
for the next run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

from ops_tools import runbook
from ops_tools.chain.status import wait_finality_advances, wait_finality_stalls, wait_for
from ops_tools.drills import health
from ops_tools.drills import report as rep
from ops_tools.drills.network import LocalNetwork
from ops_tools.drills.scenarios import FINALITY, READY, RESOLVED, Scenario, build
from ops_tools.errors import InputError, OpsError
from ops_tools.filelock import LockBusy, file_lock
from ops_tools.monitoring.alerts import rule_for_s, scrape_interval_s, wait_for_alert

JOURNAL_NAME = "journal.json"
LOCK_NAME = "lock"
FINISHED = ("completed", "restored", "declined")
STEPS = ("healthy", "inject", "detect", "remove", "recover")
# Without monitoring, a finality stall is the finalized height unchanged this long (at least).
STALL_WINDOW_S = 15.0
STALL_SLOTS = 15
# The alert a drill can do without: its fault shows on the chain itself.
SEEN_ON_CHAIN = ("FinalityStalled",)


class DrillBusy(OpsError):
    pass


@dataclass(kw_only=True)
class DrillJournal(runbook.Journal):
    drill_id: str
    scenario: str
    arg: str | None = None
    inventory: str = ""
    started: float = field(default_factory=time.time)
    HISTORY: ClassVar[bool] = False

    def pending(self) -> bool:
        """Whether a fault may still be in the network: injected (or being injected) and the
        drill not finished."""
        return self.status not in FINISHED and self.record("inject") is not None \
            and not self.done("recover")


def journal_path(net: LocalNetwork) -> Path:
    return net.drill_dir / JOURNAL_NAME


def load(net: LocalNetwork) -> DrillJournal | None:
    path = journal_path(net)
    try:
        return DrillJournal.read(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"the drill journal {path} is not readable ({exc}); inspect it, restore"
                         " by hand what its facts say was injected, then remove it") from None


def detect_timeout(bound: float) -> float:
    # The bound is what the issue promises; the wait is generous on a loaded machine, and the
    # report says whether the bound held.
    return max(3 * bound, bound + 120)


class Drill:
    """One drill's steps over its journal."""

    def __init__(self, net: LocalNetwork, scenario: Scenario, journal: DrillJournal,
                 display: runbook.Display | None = None) -> None:
        self.net, self.scenario, self.journal, self.display = net, scenario, journal, display
        self.facts = journal.facts
        net.on_facts = self._fault_facts

    def _fault_facts(self, facts: dict[str, Any]) -> None:
        self.facts.setdefault("fault", {}).update(facts)
        self.journal.save()

    def _note(self, **facts: Any) -> None:
        self.facts.update(facts)
        self.journal.save()

    # ---- steps -------------------------------------------------------------------------------
    def healthy(self) -> str:
        return health.check(self.net)

    def inject(self) -> str:
        net, alert = self.net, self.scenario.alert
        if net.monitored:
            self._note(**{rep.F_FOR: rule_for_s(net.prometheus_url, alert.name),
                          rep.F_SCRAPE: scrape_interval_s(net.prometheus_url)})
        self._note(**{rep.F_SLOT: net.slot_s(), rep.F_BEFORE: list(net.head(net.public_host))})
        self._fault_facts(self.scenario.fault.inject(net) or {})
        self._note(**{rep.F_INJECTED: time.time()})
        return f"{self.scenario.summary}"

    def detect(self) -> str:
        alert = self.scenario.alert
        if not self.net.monitored:
            return self._detect_stall()
        bound = rep.detect_bound(self.facts.get(rep.F_FOR), self.facts.get(rep.F_SCRAPE)) or 60
        wait_for_alert(self.net.alertmanager_url, alert.name, alert.labels,
                       timeout_s=detect_timeout(bound))
        self._note(**{rep.F_DETECTED: time.time(), rep.F_DETECTED_BY: "alertmanager"})
        took = time.time() - float(self.facts.get(rep.F_INJECTED, time.time()))
        return f"{alert.name} fires in Alertmanager, {took:.1f} s after the injection"

    def _detect_stall(self) -> str:
        """No monitoring: the stall the alert would report, seen on the public node itself."""
        net = self.net
        window = max(STALL_WINDOW_S, STALL_SLOTS * net.slot_s())
        height = wait_finality_stalls(str(net.rpc(net.public_host).url), window,
                                      detect_timeout(2 * window))
        self._note(**{rep.F_DETECTED: time.time(), rep.F_DETECTED_BY: "finality"})
        took = time.time() - float(self.facts.get(rep.F_INJECTED, time.time()))
        return (f"no monitoring: finality stalled at #{height} on {net.public_host} (unchanged"
                f" for {window:.0f} s), {took:.1f} s after the injection")

    def remove(self) -> str:
        heads = {}
        for host in self.net.nodes:
            with contextlib.suppress(OpsError):  # a stopped node has no head to record
                heads[host] = list(self.net.head(host))
        self._note(**{rep.F_AT_REMOVAL: heads})
        detail = self.scenario.fault.remove(self.net, dict(self.facts.get("fault") or {}))
        self._note(**{rep.F_REMOVED: time.time()})
        return detail

    def recover(self) -> str:
        net, seen = self.net, []
        wait_s = max(180.0, 60 * net.slot_s())
        for check in self.scenario.recovery:
            if check == FINALITY:
                at = (self.facts.get(rep.F_AT_REMOVAL) or {}).get(net.public_host)
                start, reached = wait_finality_advances(
                    str(net.rpc(net.public_host).url), wait_s, blocks=2,
                    since=int(at[2]) if at else None)
                seen.append(f"finality advances on {net.public_host} (#{start} -> #{reached})")
            elif check == READY:
                for host in self.scenario.fault.hosts():
                    wait_for(f"{host} to run and be ready", lambda h=host: self._ready(h),
                             wait_s, interval_s=1)
                seen.append(f"{', '.join(self.scenario.fault.hosts())} ready")
            elif check == RESOLVED and not net.monitored:
                seen.append("no monitoring: no alert to resolve")
            elif check == RESOLVED:
                alert = self.scenario.alert
                bound = rep.detect_bound(self.facts.get(rep.F_FOR),
                                         self.facts.get(rep.F_SCRAPE)) or 60
                wait_for_alert(net.alertmanager_url, alert.name, alert.labels,
                               timeout_s=detect_timeout(bound), resolved=True)
                self._note(**{rep.F_RESOLVED: time.time()})
                seen.append(f"{alert.name} resolved")
        self._note(**{rep.F_RECOVERED: time.time()})
        self._measure_forks()
        return "; ".join(seen)

    def _ready(self, host: str) -> tuple[bool, str]:
        if not self.net.running(host):
            return False, "not running"
        if host in self.net.nodes:
            return True, f"best #{self.net.rpc(host).best_number()}"
        return self.net.service_ready(host)

    def _measure_forks(self) -> None:
        net, dropped = self.net, {}
        for host, head in (self.facts.get(rep.F_AT_REMOVAL) or {}).items():
            with contextlib.suppress(OpsError):
                dropped[host] = net.fork_depth(net.public_host, int(head[0]), str(head[1]))
        with contextlib.suppress(OpsError):
            self._note(**{rep.F_KEPT: dropped, rep.F_AFTER: list(net.head(net.public_host))})

    def steps(self) -> dict[str, runbook.Step]:
        fault, net = self.scenario.fault, self.net

        def fault_facts() -> dict[str, Any]:
            return dict(self.facts.get("fault") or {})

        def present() -> runbook.Check:
            return fault.present(net, fault_facts())

        def absent() -> runbook.Check:
            there, seen = present()
            return not there, seen

        return {
            "healthy": runbook.Step("healthy", self.healthy, lambda: (False, "checked again")),
            "inject": runbook.Step("inject", self.inject, present),
            "detect": runbook.Step("detect", self.detect,
                                   lambda: (rep.F_DETECTED in self.facts, "fired earlier")),
            "remove": runbook.Step("remove", self.remove, absent),
            "recover": runbook.Step("recover", self.recover,
                                    lambda: (rep.F_RECOVERED in self.facts, "recovered")),
        }

    def settle(self, names: tuple[str, ...]) -> None:
        steps = self.steps()
        for name in names:
            runbook.settle(self.journal, steps[name], self.display)

    def report(self, status: str, error: str | None = None) -> rep.Report:
        return rep.build(self.scenario.to_json(), status, self.facts, self.net.public_host,
                         error)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so that a stopped drill removes its fault on the way."""

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def drill_lock(net: LocalNetwork) -> Iterator[None]:
    me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    try:
        with file_lock(net.drill_dir / LOCK_NAME, wait=False, holder=me, mode=0o600):
            yield
    except LockBusy as busy:
        raise DrillBusy(f"another drill runs on this network (pid {busy.holder.get('pid')});"
                        " wait for it to end") from None


def require(net: LocalNetwork, scenario: Scenario) -> None:
    """A network without monitoring runs only the drills whose fault shows on the chain."""
    if not net.monitored and scenario.alert.name not in SEEN_ON_CHAIN:
        raise InputError(f"drill {scenario.name} waits for {scenario.alert.name} in"
                         f" Alertmanager, and inventory {net.inventory.path} has no monitoring"
                         " host; deploy roles/monitoring (docs/monitoring.md) first")


def finish_pending(net: LocalNetwork, journal: DrillJournal,
                   display: runbook.Display | None = None) -> rep.Report:
    """Remove the fault a drill that did not finish left, and check the recovery."""
    scenario = build(journal.scenario, journal.arg, net.topology())
    journal.resume()
    drill = Drill(net, scenario, journal, display)
    try:
        drill.settle(("remove", "recover"))
    except OpsError as exc:
        return drill.report("failed", str(exc))
    journal.status = "completed" if journal.done("detect") else "restored"
    journal.save()
    return drill.report(journal.status)


def run(net: LocalNetwork, name: str | None, arg: str | None, *, resume: bool = False,
        display: runbook.Display | None = None,
        on_previous: Any = None) -> tuple[rep.Report | None, rep.Report | None]:
    """(the previous drill's report when it had to be finished, this drill's report)."""
    net.drill_dir.mkdir(parents=True, exist_ok=True)
    with drill_lock(net), terminate_as_interrupt():
        previous, earlier = None, load(net)
        if earlier is not None and earlier.pending():
            if on_previous is not None:
                on_previous(earlier)
            previous = finish_pending(net, earlier, display)
            if previous.status == "failed":
                raise OpsError(f"the fault of drill {earlier.drill_id} ({earlier.scenario}) is"
                               f" not restored: {previous.error}; the journal"
                               f" {journal_path(net)} keeps it; fix that and run --resume")
        elif earlier is not None and earlier.record("inject") is None \
                and earlier.status not in FINISHED:
            earlier.status = "declined"  # stopped before it injected anything
            earlier.save()
        if resume:
            if previous is None:
                raise InputError(f"no drill to resume: {journal_path(net)} holds no drill with"
                                 " a fault left in the network")
            return previous, None
        if name is None:
            raise InputError("name a scenario (or --resume a drill that did not finish)")
        scenario = build(name, arg, net.topology())
        require(net, scenario)
        journal = DrillJournal(path=journal_path(net), drill_id=uuid.uuid4().hex[:12],
                               scenario=name, arg=arg, inventory=str(net.inventory.path))
        journal.save()
        drill = Drill(net, scenario, journal, display)
        try:
            drill.settle(("healthy",))
        except health.SickNetwork as exc:
            journal.status, journal.error = "declined", str(exc)
            journal.save()
            raise
        try:
            drill.settle(("inject", "detect"))
        except BaseException as exc:
            # The fault goes out with the drill (a SIGKILL leaves it to the next run).
            with contextlib.suppress(OpsError, KeyboardInterrupt):
                drill.settle(("remove",))
            if isinstance(exc, OpsError):
                with contextlib.suppress(OpsError, KeyboardInterrupt):
                    drill.settle(("recover",))
                    journal.status = "failed"
                    journal.save()
            raise
        drill.settle(("remove", "recover"))
        journal.status = "completed"
        journal.save()
        return previous, drill.report("completed")
