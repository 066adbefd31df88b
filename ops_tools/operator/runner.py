"""The onboarding run: a preflight, then each step, journaled.

A step the journal marks done is skipped only when its ``check`` finds what it produced still
true in the world (the keystore, the chain, the attestation service, the service manager, the
gateway); a step whose result is gone is run again and the output says why. The journal says
what was attempted; the world says what is true.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ops_tools import runbook
from ops_tools.errors import InputError, OpsError
from ops_tools.operator.context import Context, Options
from ops_tools.operator.journal import Journal
from ops_tools.operator.steps import (
    Outcome,
    attestation,
    daemon,
    funding,
    gpu,
    heartbeat,
    stake,
    wallet,
)
from ops_tools.wallet import operator, rpc
from ops_tools.wallet.tokens import format_tokens

STEPS = (gpu, wallet, funding, attestation, stake, daemon, heartbeat)
STEP_NAMES = tuple(s.NAME for s in STEPS)


class Display(Protocol):
    def skipped(self, title: str, detail: str) -> None: ...
    def redoing(self, title: str, reason: str) -> None: ...
    def started(self, title: str) -> None: ...
    def finished(self, title: str, detail: str) -> None: ...
    def failed(self, title: str, error: str) -> None: ...
    def note(self, message: str) -> None: ...


@dataclass
class RunResult:
    journal: Journal
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    redone: dict[str, str] = field(default_factory=dict)  # step -> why its result was gone


def prepare(opts: Options) -> None:
    """The state and secrets directories, private: no one else lists or writes them. Passing
    through the state directory (o+x, 0711) is allowed there, as playbooks/operator_worker.yml
    sets it: the worker's user reaches its own directory and the keystore below it."""
    for directory in (opts.state_dir, opts.secrets_dir):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        passable = 0o011 if directory == opts.state_dir else 0
        if directory.stat().st_mode & 0o077 & ~passable:
            directory.chmod(0o700)


def preflight(ctx: Context) -> None:
    """Network and stake, before any step: a refusal here leaves nothing changed anywhere."""
    opts = ctx.options
    rpc.require_websocket(opts.rpc_url)
    substrate = ctx.substrate()
    operator.require_pallet(substrate, opts.rpc_url)
    genesis = operator.genesis_hash(substrate)
    if not ctx.journal.bind_network(genesis):
        ctx.emit(f"the network was reset (genesis {genesis}): onboarding starts afresh")
    _check_history(ctx)
    minimum = operator.min_stake(substrate) or 0
    wanted = minimum if opts.stake is None else opts.stake
    if wanted < minimum:
        raise InputError(f"--stake: {wanted} plancks is below MinStake {minimum} plancks"
                         f" ({format_tokens(minimum)} tokens); give --stake {minimum} or more"
                         " (nothing was done)")
    registered = ctx.facts.get("stake")
    if registered is not None and int(registered) != wanted and ctx.journal.done(stake.NAME):
        ctx.emit(f"already registered with stake {registered}; --stake {wanted} is ignored")
        wanted = int(registered)
    ctx.facts.update({"stake": str(wanted), "min_stake": str(minimum), "genesis_hash": genesis})
    ctx.journal.save()


def _check_history(ctx: Context) -> None:
    """Same genesis, other history: the journal keeps a finalized block it saw; a chain without
    that block is a network re-created from the same spec (its genesis cannot tell)."""
    substrate = ctx.substrate()
    seen = ctx.facts.get("chain_seen")
    if isinstance(seen, list) and len(seen) == 2:
        number, block_hash = int(seen[0]), str(seen[1])
        now = substrate.get_block_hash(number)
        if now != block_hash:
            ctx.recreated = True
            ctx.emit(f"the chain's block {number} is {now or 'not there'}, not {block_hash} as"
                     " the journal saw it: the network was re-created with the same genesis;"
                     " every step's result is checked and redone where it is gone")


def _remember_history(ctx: Context) -> None:
    """After a complete run only: a run that stops keeps the block of the last one."""
    substrate = ctx.substrate()
    head = substrate.get_chain_finalised_head()
    ctx.facts["chain_seen"] = [substrate.get_block_number(head), head]
    ctx.journal.save()


def settle(ctx: Context, step: Any, display: Display, result: RunResult) -> None:
    """Run ``step`` unless the journal marks it done and its ``check`` finds its result true."""
    outcome: list[Outcome] = []

    def run() -> str:
        outcome.append(step.run(ctx))
        return outcome[0].detail

    def check() -> runbook.Check:
        why = step.check(ctx)
        rec = ctx.journal.record(step.NAME)
        return (True, rec.detail if rec else "") if why is None else (False, why)

    try:
        settled = runbook.settle(
            ctx.journal,
            runbook.Step(step.NAME, run, check, lambda: outcome[0].facts),
            _Titled(display, step.TITLE))
    except OpsError:
        raise
    except Exception as exc:  # an unexpected failure is still journaled and named
        raise OpsError(f"{step.NAME}: {type(exc).__name__}: {exc}") from exc
    if settled.outcome == "kept":
        result.skipped.append(step.NAME)
        return
    if settled.why:
        result.redone[step.NAME] = settled.why
    result.ran.append(step.NAME)


@dataclass
class _Titled:
    """The runbook's display events, shown with the step's title."""

    display: Display
    title: str

    def skipped(self, step: str, detail: str) -> None:
        self.display.skipped(self.title, detail)

    def redoing(self, step: str, reason: str) -> None:
        self.display.redoing(self.title, reason)

    def started(self, step: str) -> None:
        self.display.started(self.title)

    def finished(self, step: str, detail: str) -> None:
        self.display.finished(self.title, detail)

    def failed(self, step: str, error: str) -> None:
        self.display.failed(self.title, error)


def onboard(opts: Options, display: Display,
            on_context: Callable[[Context], None] | None = None,
            until: str | None = None) -> RunResult:
    """Every step, or those up to ``until`` (the playbook deploys the worker after the stake
    and then runs the rest)."""
    if until is not None and until not in STEP_NAMES:
        raise InputError(f"--until: {until!r} is not a step; use one of {', '.join(STEP_NAMES)}")
    prepare(opts)
    journal = Journal.open(opts.journal_path, opts.name)
    ctx = Context(opts, journal, emit=display.note)
    if on_context is not None:
        on_context(ctx)
    result = RunResult(journal)
    try:
        preflight(ctx)
        for step in STEPS:
            settle(ctx, step, display, result)
            if until == step.NAME:
                break
        else:
            ctx.journal.status = "completed"
            _remember_history(ctx)
    finally:
        ctx.close()
    return result
