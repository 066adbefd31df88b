"""What a drill measured, from its journal's facts (pure): time to detect, time to recover,
the blocks lost to the stall, and whether the alert fired within its bound."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# The facts the runner journals (unix seconds, block heights); a killed-and-resumed drill may
# lack some of them, and its report says so (None) rather than guessing.
F_INJECTED = "injected_at"
F_DETECTED = "detected_at"
F_REMOVED = "removed_at"
F_RESOLVED = "resolved_at"
F_RECOVERED = "recovered_at"
F_BEFORE = "head_before"  # [best, hash, finalized] of the public node before the injection
F_AT_REMOVAL = "heads_at_removal"  # host -> [best, hash, finalized] when the fault is removed
F_KEPT = "kept_at_removal"  # host -> blocks of its head at removal that the network dropped
F_AFTER = "head_after"  # the public node once recovered
F_FOR = "alert_for_s"
F_SCRAPE = "scrape_interval_s"
F_SLOT = "slot_s"
F_DETECTED_BY = "detected_by"  # alertmanager, or finality (a network without monitoring)


@dataclass(frozen=True)
class Blocks:
    """Blocks over the fault's window: the slots it lasted, the blocks the kept chain gained
    in it, the slots with no block on that chain (lost), the blocks authored and then dropped
    (orphaned, a partition's losing side), and how far finality lagged when it ended."""

    slots: int
    produced: int
    lost: int
    orphaned: int
    unfinalized_at_removal: int
    finalized_before: int
    finalized_after: int | None


@dataclass(frozen=True)
class Report:
    scenario: dict[str, Any]
    status: str  # completed | failed | restored (a killed drill's fault removed by a later run)
    detect_s: float | None  # injection -> alert firing in Alertmanager
    detect_bound_s: float | None  # twice the rule's for: plus a scrape interval
    detected_within_bound: bool | None
    fault_s: float | None  # injection -> removal
    resolve_s: float | None  # removal -> alert resolved
    recover_s: float | None  # removal -> every recovery check passed
    blocks: Blocks | None
    error: str | None = None
    # What saw the fault: "alertmanager" (the alert fired), or "finality" (no monitoring: the
    # public node's finalized height stood still); None when the detection was not recorded.
    detected_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _span(facts: dict[str, Any], start: str, end: str) -> float | None:
    a, b = facts.get(start), facts.get(end)
    return round(float(b) - float(a), 2) if a is not None and b is not None else None


def detect_bound(alert_for_s: float | None, scrape_s: float | None) -> float | None:
    if alert_for_s is None or scrape_s is None:
        return None
    return 2 * alert_for_s + scrape_s


def blocks_of(facts: dict[str, Any], public_host: str) -> Blocks | None:
    """The block counts, when the facts hold the heads before and at removal."""
    before, at_removal = facts.get(F_BEFORE), facts.get(F_AT_REMOVAL) or {}
    fault_s, slot_s = _span(facts, F_INJECTED, F_REMOVED), facts.get(F_SLOT)
    if before is None or not at_removal or fault_s is None or not slot_s:
        return None
    dropped = facts.get(F_KEPT) or {}
    # The chain the network kept: the highest head at removal with none of its blocks dropped.
    kept = [int(head[0]) for host, head in at_removal.items() if dropped.get(host) == 0]
    produced = max(kept) - int(before[0]) if kept else 0
    slots = math.floor(fault_s / float(slot_s))
    # Nodes on the same dropped fork (rpc-0 following authority-0) count its blocks once.
    forks = {str(at_removal[h][1]): int(d) for h, d in dropped.items() if d and h in at_removal}
    orphaned = sum(forks.values())
    public = at_removal.get(public_host) or next(iter(at_removal.values()))
    after = facts.get(F_AFTER)
    return Blocks(slots=slots, produced=max(produced, 0), lost=max(slots - max(produced, 0), 0),
                  orphaned=orphaned, unfinalized_at_removal=int(public[0]) - int(public[2]),
                  finalized_before=int(before[2]),
                  finalized_after=int(after[2]) if after else None)


def build(scenario: dict[str, Any], status: str, facts: dict[str, Any], public_host: str,
          error: str | None = None) -> Report:
    bound = detect_bound(facts.get(F_FOR), facts.get(F_SCRAPE))
    detect = _span(facts, F_INJECTED, F_DETECTED)
    return Report(
        scenario=scenario, status=status, detect_s=detect, detect_bound_s=bound,
        detected_within_bound=None if detect is None or bound is None else detect <= bound,
        fault_s=_span(facts, F_INJECTED, F_REMOVED),
        resolve_s=_span(facts, F_REMOVED, F_RESOLVED),
        recover_s=_span(facts, F_REMOVED, F_RECOVERED),
        blocks=blocks_of(facts, public_host), error=error,
        detected_by=facts.get(F_DETECTED_BY),
    )
