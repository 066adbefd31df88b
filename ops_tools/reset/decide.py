"""Whether a revision needs a reset: pure logic over what was rendered and what is live."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    NOTHING = "nothing"
    ROLL_BINARY = "roll-binary"
    RESET = "reset"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


@dataclass(frozen=True)
class Observed:
    expected_genesis: str
    expected_binary_sha256: str
    public_genesis: str | None  # None: the public endpoint did not answer
    node_genesis: dict[str, str | None]  # per host: served genesis, None if unreachable
    deployed_binary_sha256: dict[str, str | None]  # per host, from the host manifests


def decide(o: Observed) -> Decision:
    if o.public_genesis is None:
        # Nothing to compare with: the network is down, and a reset brings it up on the new
        # genesis; preflight still checks the hosts against their manifests before any wipe.
        return Decision(Action.RESET, "the public endpoint does not answer; the network is down")
    if o.public_genesis != o.expected_genesis:
        return Decision(
            Action.RESET,
            f"the new revision's genesis {o.expected_genesis} differs from the live network's"
            f" {o.public_genesis}",
        )
    behind = sorted(h for h, g in o.node_genesis.items() if g != o.expected_genesis)
    if behind:
        return Decision(
            Action.RESET,
            f"the public endpoint serves the expected genesis, but {', '.join(behind)} do(es) not",
        )
    stale = sorted(h for h, s in o.deployed_binary_sha256.items() if s != o.expected_binary_sha256)
    if stale:
        return Decision(
            Action.ROLL_BINARY,
            f"same genesis; the node binary changed on {', '.join(stale)}: rolling restart",
        )
    return Decision(Action.NOTHING, f"every node already serves genesis {o.expected_genesis}")
