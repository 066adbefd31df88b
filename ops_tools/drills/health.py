"""A drill's first step: the network is healthy, or the drill does not start.

Healthy: every program of the nodes and services runs, every node answers, the public node's
finality advances, every Prometheus target is up and Alertmanager has nothing firing (a network
without monitoring: the rest). A stopped
program fails at once; what may still be settling (an alert of the previous drill resolving, a
target between scrapes) is waited for, within a bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ops_tools.chain.rpc import RpcError
from ops_tools.chain.status import WaitTimeout, wait_finality_advances
from ops_tools.drills.network import LocalNetwork
from ops_tools.errors import OpsError
from ops_tools.monitoring.alerts import firing_alerts, query

SETTLE_S = 240.0


class SickNetwork(OpsError):
    pass


def problems(net: LocalNetwork) -> tuple[list[str], list[str]]:
    """(what is broken for good, what may still settle), each one line per problem."""
    broken = [f"{host}'s program {p.name} is not running"
              for host, p in net.programs().items() if not net.running(host)]
    settling: list[str] = []
    for host in net.nodes:
        try:
            net.rpc(host).best_number()
        except RpcError as exc:
            broken.append(f"{host} does not answer: {exc}")
    for host in net.services:
        ok, seen = net.service_ready(host)
        if not ok:
            settling.append(f"{host} is not ready ({seen})")
    if not net.monitored:
        return broken, settling
    try:
        alerts = [a for a in firing_alerts(net.alertmanager_url) if a.state == "firing"]
        settling += [f"alert {a.name} fires ({_where(a.labels)}: {a.summary})" for a in alerts]
        down = query(net.prometheus_url, "up == 0")
        settling += [f"Prometheus target {r['metric'].get('job')}/"
                     f"{r['metric'].get('host') or r['metric'].get('instance')} is down"
                     for r in down]
    except OpsError as exc:
        broken.append(f"the monitoring does not answer: {exc}")
    return broken, settling


def _where(labels: dict[str, str]) -> str:
    return labels.get("host") or labels.get("instance") or "-"


def check(net: LocalNetwork, settle_s: float = SETTLE_S,
          clock: Callable[[], float] = time.monotonic) -> str:
    """Raise SickNetwork naming every problem; the line a healthy network earns."""
    deadline = clock() + settle_s
    while True:
        broken, settling = problems(net)
        if broken or (settling and clock() >= deadline):
            raise SickNetwork(
                "the network is not healthy, so no drill starts on it: " + "; ".join(
                    broken + settling) + ". Check `ops-tools status -i INVENTORY` and"
                " `ops-tools alerts`, repair it (`ops-tools localnet up`), then run the drill"
                " again")
        if not settling:
            break
        time.sleep(2)
    public = net.public_host
    try:
        start, reached = wait_finality_advances(str(net.rpc(public).url),
                                                max(30.0, 10 * net.slot_s()))
    except WaitTimeout as exc:
        raise SickNetwork(f"the network is not healthy, so no drill starts on it: {exc}."
                          " Find the authority that is down or cut off (`ops-tools status`)"
                          ) from None
    return (f"{len(net.programs())} programs run, no alert fires, finality advances on"
            f" {public} (#{start} -> #{reached})")
