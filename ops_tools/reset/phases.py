"""The phases of a reset cycle, in order, and which of them change hosts."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    BUILD = "build"  # resolve the ref, build or hit the cache
    RENDER = "render"
    COMPARE = "compare"
    DECIDE = "decide"
    PREFLIGHT = "preflight"
    STOP_SERVICES = "stop-services"
    STOP_NODES = "stop-nodes"
    RESET_AUTHORITIES = "reset-authorities"  # purge chain data (keys kept), push binary + spec
    START_AUTHORITIES = "start-authorities"
    WAIT_FINALITY = "wait-finality"
    # The platform services re-converged with the new render, in the background while the RPC
    # node restarts: they come up not ready until it serves their genesis, then ready at once.
    RESTART_SERVICES = "restart-services"
    RESET_RPC = "reset-rpc"
    START_RPC = "start-rpc"
    VERIFY = "verify"
    PUBLISH = "publish"  # the docs site's current release becomes the new genesis
    SERVICES = "services"  # declared reset actions; every service ready on the new genesis
    RECORD = "record"  # re-converge with the roles: host manifests now describe the new chain
    ROLL_BINARY = "roll-binary"  # same genesis, new binary: rolling re-provision


# Phases of each plan, in the order they run.
INSPECT = [Phase.BUILD, Phase.RENDER, Phase.COMPARE, Phase.DECIDE]
RESET = [
    Phase.PREFLIGHT,
    Phase.STOP_SERVICES,
    Phase.STOP_NODES,
    Phase.RESET_AUTHORITIES,
    Phase.START_AUTHORITIES,
    Phase.WAIT_FINALITY,
    Phase.RESTART_SERVICES,
    Phase.RESET_RPC,
    Phase.START_RPC,
    Phase.VERIFY,
    Phase.PUBLISH,
    Phase.SERVICES,
    Phase.RECORD,
]
ROLL = [Phase.PREFLIGHT, Phase.ROLL_BINARY]

# A phase that changes a host: confirmed first, never run by --dry-run.
DESTRUCTIVE = frozenset(RESET[1:] + ROLL[1:])
