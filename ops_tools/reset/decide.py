"""What a revision asks of the network: pure logic over what was rendered and what is observed.

A chain is purged only on evidence that it is not the expected one: a node that serves, or a host
manifest that records, another genesis. Silence is not that evidence: a public endpoint or a node
that does not answer (an edge or DNS fault, a crashed RPC node, a stopped authority) in front of
nodes that serve or have deployed the expected genesis is a ``repair``, which starts what is down
and never touches chain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Action(StrEnum):
    NOTHING = "nothing"
    ROLL_BINARY = "roll-binary"
    REPAIR = "repair"
    RESET = "reset"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    # What does not answer (node hosts, "public endpoint"): what a repair brings back.
    down: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Observed:
    expected_genesis: str
    expected_binary_sha256: str
    public_genesis: str | None  # None: the public endpoint did not answer any probe
    node_genesis: dict[str, str | None]  # per host: served genesis, None if it did not answer
    deployed_genesis: dict[str, str | None]  # per host, from the host manifests
    deployed_binary_sha256: dict[str, str | None]  # per host, from the host manifests
    force_reset: bool = False


PUBLIC = "public endpoint"


def _differs(o: Observed) -> list[str]:
    """Every piece of evidence that the network is not on the expected genesis."""
    seen = []
    if o.public_genesis is not None and o.public_genesis != o.expected_genesis:
        seen.append(f"the {PUBLIC} serves {o.public_genesis}")
    for host in sorted(o.node_genesis.keys() | o.deployed_genesis.keys()):
        served, deployed = o.node_genesis.get(host), o.deployed_genesis.get(host)
        if served is not None and served != o.expected_genesis:
            seen.append(f"{host} serves {served}")
        if deployed != o.expected_genesis:
            seen.append(f"{host} has deployed {deployed}")
    return seen


def decide(o: Observed) -> Decision:
    differs = _differs(o)
    if differs:
        return Decision(
            Action.RESET,
            f"the new revision's genesis {o.expected_genesis} differs from the network's:"
            f" {'; '.join(differs)}",
        )
    if o.force_reset:
        return Decision(
            Action.RESET,
            f"--force-reset: every node serves or has deployed the expected genesis"
            f" {o.expected_genesis}, and the chain is wiped anyway",
        )
    down = sorted(h for h, g in o.node_genesis.items() if g is None)
    if o.public_genesis is None:
        down.append(PUBLIC)
    if down:
        return Decision(
            Action.REPAIR,
            f"no node serves or has deployed another genesis than {o.expected_genesis}, but"
            f" {', '.join(down)} do(es) not answer: repair (start what is down; chain data"
            " kept)",
            down,
        )
    stale = sorted(h for h, s in o.deployed_binary_sha256.items() if s != o.expected_binary_sha256)
    if stale:
        return Decision(
            Action.ROLL_BINARY,
            f"same genesis; the node binary changed on {', '.join(stale)}: rolling restart",
        )
    return Decision(Action.NOTHING, f"every node already serves genesis {o.expected_genesis}")
