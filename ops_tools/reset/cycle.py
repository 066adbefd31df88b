"""The reset cycle: inspect, decide, then (when needed) run the plan's phases in order.

This module is the planner: which phases run (``phases.py``), journaling each before and after
it runs, the lock, the confirmation and the report. What each phase does is a function of its
own module (``inspection``, ``network``, ``converge``) taking the cycle's context
(``context.py``); a service with its own reset action plugs in as a phase function or as an
inventory hook (``hooks.py``), without growing a class.

``--resume`` skips a phase the journal records as done only once the world agrees
(``recheck.py``: a journal says what was attempted, the hosts say what is true); each phase
must be safe to run again (stop a stopped node, purge a purged base path, push a file that is
already there, start a started node).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools import runbook
from ops_tools.errors import InputError, OpsError
from ops_tools.reset import converge, inspection, network, repair
from ops_tools.reset.context import CycleContext, CycleFailed, Options
from ops_tools.reset.decide import Action, Decision
from ops_tools.reset.hooks import load_hooks
from ops_tools.reset.journal import Journal
from ops_tools.reset.lock import cycle_lock
from ops_tools.reset.outcome import record as record_outcome
from ops_tools.reset.phases import DESTRUCTIVE, INSPECT, REPAIR, RESET, ROLL, Phase
from ops_tools.reset.recheck import recheck

__all__ = ["CycleFailed", "Options", "Report", "ResetCycle"]


@dataclass
class Report:
    cycle_id: str | None
    decision: str
    reason: str
    revision: str | None
    expected_genesis: str | None
    plan: list[str]
    phases: list[dict[str, Any]] = field(default_factory=list)
    downtime_s: float | None = None
    # Where the downtime went: each phase inside the window with its seconds there and its
    # timed steps (host batches, waits); the rest is the cycle's own work between phases.
    downtime_breakdown: list[dict[str, Any]] = field(default_factory=list)
    total_s: float | None = None
    journal: str | None = None
    dry_run: bool = False
    # What did not answer (a repair's subject), and what the decision was taken on: each
    # node's served and deployed genesis, and every probe of the public endpoint.
    down: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    # The interrupted cycle resumed first (--resume-interrupted): its id, decision and phases.
    resumed: dict[str, Any] | None = None


PLANS: dict[Action, list[Phase]] = {Action.NOTHING: [], Action.ROLL_BINARY: ROLL,
                                    Action.REPAIR: REPAIR, Action.RESET: RESET}

# What each phase does: a function of the cycle's context, returning the journal's detail line.
RUNNERS: dict[Phase, Callable[[CycleContext], str]] = {
    Phase.BUILD: inspection.build,
    Phase.RENDER: inspection.render,
    Phase.COMPARE: inspection.compare,
    Phase.DECIDE: inspection.decision,
    Phase.PREFLIGHT: network.preflight,
    Phase.STAGE_NODES: network.stage_nodes,
    Phase.STAGE_SERVICES: converge.stage_services,
    Phase.STOP_SERVICES: network.stop_services,
    Phase.RESTART_SERVICES: converge.restart_services,
    Phase.STOP_NODES: network.stop_nodes,
    Phase.RESET_AUTHORITIES: network.reset_authorities,
    Phase.START_AUTHORITIES: network.start_authorities,
    Phase.WAIT_FINALITY: network.wait_finality,
    Phase.RESET_RPC: network.reset_rpc,
    Phase.START_RPC: network.start_rpc,
    Phase.VERIFY: network.verify,
    Phase.PUBLISH: converge.publish,
    Phase.SERVICES: converge.services,
    Phase.RECORD: converge.record,
    Phase.ROLL_BINARY: converge.roll_binary,
    Phase.REPAIR_NODES: repair.repair_nodes,
    Phase.REPAIR_EDGE: repair.repair_edge,
}

# A journal in one of these states has nothing left to resume ("declined": not confirmed).
FINISHED = ("completed", "declined")


class ResetCycle:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.ctx = CycleContext.open(opts)
        self.journal: Journal | None = None

    def run(self) -> Report:
        o = self.opts
        if o.dry_run and not o.resume:
            return self._run_locked(None)  # a dry run writes no journal and takes no lock
        path = self.ctx.dir / "journal.json"
        resumed = None
        if o.resume_interrupted and not o.resume and self._interrupted(path):
            # The interrupted cycle is finished first: a new one would decide on a half-reset
            # network. When it fails, the new cycle does not start (the next run tries again).
            first = ResetCycle(dataclasses.replace(o, resume=True, resume_interrupted=False))
            done = first.run()
            resumed = {"cycle_id": done.cycle_id, "decision": done.decision,
                       "phases": done.phases}
        report = self._run_journaled(path)
        report.resumed = resumed
        return report

    @staticmethod
    def _interrupted(path: Path) -> bool:
        return path.exists() and Journal.load(path).status not in FINISHED

    def _run_journaled(self, path: Path) -> Report:
        o = self.opts
        # The lock comes before the journal is touched: a refused second cycle must not
        # overwrite the journal of the one that holds it.
        cycle_id = Journal.load(path).cycle_id if o.resume else uuid.uuid4().hex[:12]
        with cycle_lock(self.ctx.dir / "lock", cycle_id):
            if o.resume:
                journal = Journal.load(path)
                if journal.status in FINISHED:
                    raise InputError(
                        f"the last cycle ({journal.cycle_id}) is {journal.status}; nothing to"
                        " resume"
                    )
                o.repo, o.ref = journal.repo, journal.ref
                journal.resume()
            else:
                journal = Journal.new(path, cycle_id, str(o.inventory), o.repo, o.ref)
            try:
                report = self._run_locked(journal)
            except BaseException as exc:
                self._record_outcome(journal, error=str(exc) or type(exc).__name__)
                raise
            self._record_outcome(journal, report=report)
            return report

    def _record_outcome(self, journal: Journal, *, report: Report | None = None,
                        error: str | None = None) -> None:
        """The last run's outcome, where ``ops-tools status`` and the monitoring read it
        (``last-run.json`` beside the journal, written atomically)."""
        facts = journal.facts
        outcome = {
            "cycle_id": journal.cycle_id,
            "resumed": self.opts.resume,
            "status": journal.status if error is None or journal.status == "declined"
            else "failed",
            "started": journal.started,
            "finished": time.time(),
            "decision": facts.get("action"),
            "reason": facts.get("reason"),
            "down": facts.get("down", []),
            "expected_genesis": facts.get("expected_genesis"),
            "downtime_s": report.downtime_s if report else None,
            "error": error,
            "journal": str(journal.path),
        }
        record_outcome(journal.path.parent, outcome)

    def _run_locked(self, journal: Journal | None) -> Report:
        self.journal = journal
        if journal is not None:
            # The journal's facts are the context's: a resumed cycle starts with what the
            # interrupted one learned, and every phase's findings are saved with its record.
            self.ctx.facts = journal.facts  # type: ignore[assignment]
            journal.status, journal.error = "running", None
            journal.save()
        started = time.monotonic()
        ctx = self.ctx
        if not ctx.node_hosts():
            raise InputError(f"inventory {self.opts.inventory}: no authorities or rpc_nodes hosts")
        ctx.hooks = load_hooks(ctx.var("net_services"), set(ctx.inventory.hosts()))
        try:
            ctx.load_nodes()
            for phase in INSPECT:
                self._phase(phase)
            decision = Decision(Action(ctx.facts["action"]), ctx.facts["reason"])
            plan = PLANS[decision.action]
            if self.opts.dry_run or not plan:
                if journal is not None:
                    journal.status = "completed"
                    journal.save()
                return self._report(decision, plan, started)
            try:
                self._confirm(decision, plan)
            except CycleFailed as exc:
                if journal is not None:  # nothing to resume: it was never confirmed
                    journal.status, journal.error = "declined", str(exc)
                    journal.save()
                raise
            for phase in plan:
                self._phase(phase)
        finally:
            ctx.close()
        if journal is not None:
            journal.status = "completed"
            journal.save()
        return self._report(decision, plan, started)

    def _report(self, decision: Decision, plan: list[Phase], started: float) -> Report:
        facts = self.ctx.facts
        downtime = None
        if "downtime_from" in facts and "downtime_to" in facts:
            downtime = facts["downtime_to"] - facts["downtime_from"]
        phases = [
            {
                "name": p.name,
                "status": p.status,
                "seconds": round((p.finished or time.time()) - p.started, 2),
                "detail": p.detail,
            }
            for p in (self.journal.steps if self.journal else [])
        ]
        return Report(
            cycle_id=self.journal.cycle_id if self.journal else None,
            decision=decision.action.value,
            reason=decision.reason,
            revision=facts.get("revision"),
            expected_genesis=facts.get("expected_genesis"),
            plan=[p.value for p in plan],
            phases=phases,
            downtime_s=round(downtime, 2) if downtime is not None else None,
            downtime_breakdown=self._breakdown(),
            total_s=round(time.monotonic() - started, 2),
            journal=str(self.journal.path) if self.journal else None,
            dry_run=self.opts.dry_run,
            down=list(facts.get("down", [])),
            evidence=self._evidence(),
        )

    def _breakdown(self) -> list[dict[str, Any]]:
        facts = self.ctx.facts
        lo, hi = facts.get("downtime_from"), facts.get("downtime_to")
        if lo is None or hi is None or self.journal is None:
            return []
        return breakdown(lo, hi, [(p.name, p.started, p.finished) for p in self.journal.steps],
                         facts.get("timings", []))

    def _evidence(self) -> dict[str, Any]:
        facts = self.ctx.facts
        roles = {n.host: n.role for n in self.ctx.nodes}
        return {
            "public_endpoint": self.ctx.var("net_public_rpc_url"),
            "public_probes": list(facts.get("public_probes", [])),
            "nodes": {
                host: {"role": roles.get(host), "serves": served,
                       "deployed": facts.get("deployed_genesis", {}).get(host)}
                for host, served in facts.get("node_genesis", {}).items()
            },
        }

    def _confirm(self, decision: Decision, plan: list[Phase]) -> None:
        if self.opts.yes:
            return
        hosts = ", ".join(n.host for n in self.ctx.nodes)
        text = (
            f"{decision.reason}.\nThis will {decision.action.value} the network of"
            f" {self.opts.inventory} ({hosts}): phases {', '.join(p.value for p in plan)}."
        )
        if decision.action is Action.RESET:
            wiped = "\n".join(f"  {n.host}: the chain database under {n.manifest['base_path']}"
                               for n in self.ctx.nodes)
            text += (f"\nIt deletes:\n{wiped}\nand every balance and account on the chain;"
                     " keystores and node keys are kept.")
        elif decision.action is Action.REPAIR:
            text += " It starts what is down; no chain data is touched."
        if not self.opts.confirm(text):
            raise CycleFailed("not confirmed; nothing was changed (pass --yes to run unattended)")

    def _phase(self, phase: Phase) -> None:
        if self.opts.dry_run and phase in DESTRUCTIVE:
            raise AssertionError(f"dry run reached destructive phase {phase}")
        ctx, journal = self.ctx, self.journal
        ctx.phase = phase.value
        try:
            if journal is None:  # a dry run: nothing is journaled
                self.opts.on_step(phase.value)
                RUNNERS[phase](ctx)
            else:
                runbook.settle(journal, runbook.Step(phase.value, lambda: RUNNERS[phase](ctx),
                                                     lambda: recheck(phase, ctx)),
                               _Display(self.opts.on_step))
        except OpsError as exc:  # HostOpFailed included
            where = f" (journal: {journal.path})" if journal else ""
            raise CycleFailed(f"phase {phase.value} failed: {exc}{where}") from None


def breakdown(lo: float, hi: float, phases: list[tuple[str, float, float | None]],
              timings: list[list[Any]]) -> list[dict[str, Any]]:
    """The downtime window [lo, hi] (epoch seconds) by phase: each phase run's seconds inside
    it and its timed steps ([phase, step, start, seconds]) that began inside it, in order; then
    what no phase accounts for (journal writes, the next phase's set-up)."""
    out: list[dict[str, Any]] = []
    for i, (name, started, finished) in enumerate(phases):
        if finished is None:  # a run killed in it: it ended when the next attempt began
            finished = phases[i + 1][1] if i + 1 < len(phases) else hi
        start, end = max(started, lo), min(finished, hi)
        if end <= start:
            continue
        steps = [{"step": step, "seconds": round(seconds, 2)}
                 for phase, step, at, seconds in timings
                 if phase == name and start - 0.01 <= at <= end]
        out.append({"phase": name, "seconds": round(end - start, 2), "steps": steps})
    rest = (hi - lo) - sum(p["seconds"] for p in out)
    out.append({"phase": "(between phases)", "seconds": round(max(rest, 0.0), 2), "steps": []})
    return out


class _Display:
    """The cycle's progress callback: told of each phase that runs."""

    def __init__(self, on_step: Callable[[str], None]) -> None:
        self.started = on_step

    def skipped(self, step: str, detail: str) -> None:
        pass

    def redoing(self, step: str, reason: str) -> None:
        pass

    def finished(self, step: str, detail: str) -> None:
        pass

    def failed(self, step: str, error: str) -> None:
        pass
