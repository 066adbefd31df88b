"""The phases of a reset cycle, in order, and which of them change hosts."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    BUILD = "build"  # resolve the ref, build or hit the cache
    RENDER = "render"
    COMPARE = "compare"
    DECIDE = "decide"
    PREFLIGHT = "preflight"
    # The new binary and spec pushed beside the live ones and checked, before the downtime: the
    # window's work on a node's host is then a purge, two renames and a start.
    STAGE_NODES = "stage-nodes"
    # The platform services' files for the new render, written while they still serve the old
    # network: the restart is left to restart-services, so the Ansible run is outside the
    # downtime.
    STAGE_SERVICES = "stage-services"
    STOP_SERVICES = "stop-services"
    # The staged services restarted, all at once, on the new genesis: each answers not ready
    # (naming both hashes) until the new network serves it, then ready at once. Their start-up
    # overlaps the nodes' stop instead of following the RPC node's start.
    RESTART_SERVICES = "restart-services"
    STOP_NODES = "stop-nodes"
    # purge chain data (keys kept), the staged binary + spec into place, checked; start
    RESET_AUTHORITIES = "reset-authorities"
    START_AUTHORITIES = "start-authorities"
    WAIT_FINALITY = "wait-finality"
    RESET_RPC = "reset-rpc"
    START_RPC = "start-rpc"
    VERIFY = "verify"
    PUBLISH = "publish"  # the docs site's current release becomes the new genesis
    SERVICES = "services"  # declared reset actions; every service ready on the new genesis
    RECORD = "record"  # re-converge with the roles: host manifests now describe the new chain
    ROLL_BINARY = "roll-binary"  # same genesis, new binary: rolling re-provision
    # same genesis, something in front of it down: start it again, chain data kept
    REPAIR_NODES = "repair-nodes"
    REPAIR_EDGE = "repair-edge"


# Phases of each plan, in the order they run.
INSPECT = [Phase.BUILD, Phase.RENDER, Phase.COMPARE, Phase.DECIDE]
RESET = [
    Phase.PREFLIGHT,
    Phase.STAGE_NODES,
    Phase.STAGE_SERVICES,
    Phase.STOP_SERVICES,
    Phase.RESTART_SERVICES,
    Phase.STOP_NODES,
    Phase.RESET_AUTHORITIES,
    Phase.START_AUTHORITIES,
    Phase.WAIT_FINALITY,
    Phase.RESET_RPC,
    Phase.START_RPC,
    Phase.VERIFY,
    Phase.PUBLISH,
    Phase.SERVICES,
    Phase.RECORD,
]
ROLL = [Phase.PREFLIGHT, Phase.ROLL_BINARY]
REPAIR = [Phase.REPAIR_NODES, Phase.REPAIR_EDGE, Phase.VERIFY]

# A phase that changes a host: confirmed first, never run by --dry-run.
DESTRUCTIVE = frozenset(RESET[1:] + ROLL[1:] + [Phase.REPAIR_NODES, Phase.REPAIR_EDGE])
