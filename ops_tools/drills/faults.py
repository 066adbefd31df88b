"""The faults a drill injects: each a frozen description (what, on which hosts) whose ``inject``,
``remove`` and ``present`` act through an ``Env``, the network's I/O (``drills.network``).

``inject`` returns the facts that ``remove`` needs (they are journaled first, so that a drill
killed right after the injection is restored by the next run); ``remove`` and ``inject`` are
idempotent (a resumed drill may repeat them); ``present`` says whether the fault is still there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ops_tools.errors import OpsError

Facts = dict[str, Any]


class Env(Protocol):
    """What faults need of the network (``drills.network.LocalNetwork`` implements it)."""

    def stop(self, host: str) -> None: ...
    def start(self, host: str) -> None: ...
    def running(self, host: str) -> bool: ...
    def node_call(self, host: str, method: str, params: list[Any] | None = None) -> Any: ...
    def peer_id(self, host: str) -> str: ...
    def p2p_address(self, host: str) -> str: ...
    def faucet_balance(self, host: str) -> tuple[int, int, int]: ...
    def faucet_drain(self, host: str, keep: int) -> Facts: ...
    def faucet_refill(self, host: str, facts: Facts) -> str: ...


class FirewallEnv(Env, Protocol):
    """What a partition by firewall rules needs: a network whose hosts have namespaces of their
    own (``drills.remote.RemoteNetwork``)."""

    def p2p_endpoint(self, host: str) -> tuple[str, int]: ...
    def block(self, host: str, peers: list[tuple[str, int]], anyone: bool = False) -> None: ...
    def unblock(self, host: str) -> None: ...
    def blocked(self, host: str) -> bool: ...


@runtime_checkable
class Fault(Protocol):
    def describe(self) -> dict[str, Any]: ...
    def hosts(self) -> tuple[str, ...]: ...
    def inject(self, env: Env) -> Facts: ...
    def remove(self, env: Env, facts: Facts) -> str: ...
    def present(self, env: Env, facts: Facts) -> tuple[bool, str]: ...


class FaultError(OpsError):
    pass


@dataclass(frozen=True)
class StopPrograms:
    """Stop programs (a node, a service) through their service manager; start them again."""

    targets: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        return {"kind": "stop", "hosts": list(self.targets)}

    def hosts(self) -> tuple[str, ...]:
        return self.targets

    def inject(self, env: Env) -> Facts:
        for host in self.targets:
            env.stop(host)
        return {}

    def remove(self, env: Env, facts: Facts) -> str:
        for host in self.targets:
            env.start(host)
        return f"started {', '.join(self.targets)}"

    def present(self, env: Env, facts: Facts) -> tuple[bool, str]:
        down = [h for h in self.targets if not env.running(h)]
        return bool(down), f"stopped: {', '.join(down)}" if down else "all running"


@dataclass(frozen=True)
class Partition:
    """Cut one node off from the others at the p2p layer: it refuses their peer ids, inbound
    and outbound (the development node's ``system_removeReservedPeer``, as a Substrate node
    under ``--reserved-only`` does), and ``system_addReservedPeer`` dials them again. Nothing
    outside the node processes changes (no firewall, no namespace)."""

    cut: str
    others: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        return {"kind": "partition", "cut": self.cut, "from": list(self.others)}

    def hosts(self) -> tuple[str, ...]:
        return (self.cut, *self.others)

    def inject(self, env: Env) -> Facts:
        peers = {h: env.peer_id(h) for h in self.others}
        for peer in peers.values():
            env.node_call(self.cut, "system_removeReservedPeer", [peer])
        return {"peer_ids": peers}

    def remove(self, env: Env, facts: Facts) -> str:
        for host in self.others:
            env.node_call(self.cut, "system_addReservedPeer", [env.p2p_address(host)])
        return f"{self.cut} dials {', '.join(self.others)} again"

    def present(self, env: Env, facts: Facts) -> tuple[bool, str]:
        ids = dict(facts.get("peer_ids") or {h: env.peer_id(h) for h in self.others})
        blocked = env.node_call(self.cut, "devnode_blockedPeers") or []
        cut_off = [h for h, pid in ids.items() if pid in blocked]
        return bool(cut_off), (f"{self.cut} refuses {', '.join(cut_off)}" if cut_off
                               else f"{self.cut} refuses no peer")


@dataclass(frozen=True)
class FirewallPartition:
    """Cut one node off from the others in the hosts' network namespaces: on the cut host, a
    rule set dropping p2p traffic to and from every other node's address and port; on each
    other host, one dropping it to and from the cut node's (``drills.firewall``). Removed by
    deleting those tables, which needs no fact of the injection: a drill killed half-way
    through is restored the same way. The node processes are not touched."""

    cut: str
    others: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        return {"kind": "partition", "by": "nftables", "cut": self.cut, "from": list(self.others)}

    def hosts(self) -> tuple[str, ...]:
        return (self.cut, *self.others)

    def inject(self, env: Env) -> Facts:
        fw = _firewall(env)
        ends = {h: fw.p2p_endpoint(h) for h in self.hosts()}
        facts = {"endpoints": {h: list(e) for h, e in ends.items()}}
        env_facts = getattr(env, "on_facts", None)
        if env_facts is not None:  # journaled before the first rule goes in
            env_facts(facts)
        # The cut authority drops p2p traffic with any address on the network's p2p ports: a
        # node outside the inventory (an operator's full node) would otherwise relay its votes.
        fw.block(self.cut, [ends[h] for h in self.others], anyone=True)
        for host in self.others:
            fw.block(host, [ends[self.cut]])
        return facts

    def remove(self, env: Env, facts: Facts) -> str:
        fw = _firewall(env)
        for host in self.hosts():
            fw.unblock(host)
        return f"the drill's rules removed from {', '.join(self.hosts())}"

    def present(self, env: Env, facts: Facts) -> tuple[bool, str]:
        fw = _firewall(env)
        left = [h for h in self.hosts() if fw.blocked(h)]
        return bool(left), (f"rules of the drill on {', '.join(left)}" if left
                            else "no rule of the drill on any host")


def _firewall(env: Env) -> FirewallEnv:
    if not all(hasattr(env, m) for m in ("p2p_endpoint", "block", "unblock", "blocked")):
        raise FaultError("this network has no firewall the drill can set (a partition by rules"
                         " runs on hosts with network namespaces of their own)")
    return env  # type: ignore[return-value]


@dataclass(frozen=True)
class FaucetDrain:
    """Move the faucet's balance, but for a few drips (fewer than the alert's threshold), to a
    throwaway account of the drill, and all of it back afterwards: real transfers, so the
    faucet's own metric and the rule see a real low balance."""

    host: str

    def describe(self) -> dict[str, Any]:
        return {"kind": "faucet-drain", "host": self.host}

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)

    def inject(self, env: Env) -> Facts:
        balance, drip, min_drips = env.faucet_balance(self.host)
        keep = drip * max(1, min_drips // 2)
        if balance <= keep:
            raise FaultError(f"{self.host}'s balance ({balance}) is already under {keep};"
                             " top it up first (docs/faucet.md)")
        return env.faucet_drain(self.host, keep)

    def remove(self, env: Env, facts: Facts) -> str:
        return env.faucet_refill(self.host, facts)

    def present(self, env: Env, facts: Facts) -> tuple[bool, str]:
        balance, drip, min_drips = env.faucet_balance(self.host)
        return balance < drip * min_drips, f"{balance // max(drip, 1)} drips left"
