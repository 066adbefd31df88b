"""The network a drill acts on, read from its inventory and the manifests its roles wrote: the
hosts (nodes, services), their programs, the public RPC, Prometheus and Alertmanager. It is the
``faults.Env`` of the drills.

``LocalNetwork`` is the local network (every host on this machine, under its supervisord);
``drills.remote.RemoteNetwork`` the same over SSH for an inventory of remote machines, and
``drills.remote.open_network`` picks the one an inventory needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from ops_tools import atomic
from ops_tools.chain.rpc import RpcClient
from ops_tools.deploy.inventory import Inventory, monitoring_urls
from ops_tools.deploy.manifests import SERVICE_MANIFEST_NAME, read_local_manifest
from ops_tools.deploy.paths import NETWORKS, localnet_dir
from ops_tools.drills.faults import Facts, FaultError
from ops_tools.drills.scenarios import Topology
from ops_tools.errors import InputError, OpsError
from ops_tools.programs import Program
from ops_tools.secrets import read_secret

COMMAND_TIMEOUT_S = 120
READY_TIMEOUT_S = 5
# A parent chain walked back to the canonical one: bounded (a drill stalls for minutes).
MAX_FORK_DEPTH = 5000


class LocalNetwork:
    """The local network (``inventories/local``, ``net_localnet: true``)."""

    def __init__(self, inventory: Inventory, state: Path | None = None) -> None:
        self.inventory = inventory
        if not any(v.get("net_localnet") is True for v in inventory.hostvars.values()):
            raise InputError(f"inventory {inventory.path} is not the local network"
                             " (net_localnet: true); open it with drills.remote.open_network")
        self.state = state or localnet_dir()
        self.nodes: dict[str, dict[str, Any]] = {}
        for host in inventory.hosts("authorities") + inventory.hosts("rpc_nodes"):
            manifest = read_local_manifest(self.state, host)
            if manifest is None:
                raise OpsError(f"{host} has no manifest under {self.state}; is the local network"
                               " up? (ops-tools localnet up)")
            self.nodes[host] = manifest
        self.services: dict[str, dict[str, Any]] = {}
        for host in inventory.hosts("services"):
            manifest = read_local_manifest(self.state, host, SERVICE_MANIFEST_NAME)
            if manifest is not None:
                self.services[host] = manifest
        self.prometheus_url, self.alertmanager_url = monitoring_urls(inventory)
        self.monitored = True
        self.drill_dir = self.state / "drills"
        public = [h for h in inventory.hosts("rpc_nodes") if h in self.nodes]
        self.public_host = public[0] if public else inventory.hosts("authorities")[0]

    def close(self) -> None:
        """Nothing held open here (a remote network closes its port forwards)."""

    # ---- topology ----------------------------------------------------------------------------
    def topology(self) -> Topology:
        return Topology(
            authorities=tuple(self.inventory.hosts("authorities")),
            rpc_nodes=tuple(self.inventory.hosts("rpc_nodes")),
            services={h: str(m.get("service") or h) for h, m in self.services.items()},
        )

    def slot_s(self) -> float:
        spec = yaml.safe_load((NETWORKS / "local.yml").read_text())
        return int(spec["consensus"]["slot_duration_ms"]) / 1000

    def programs(self) -> dict[str, Program]:
        """Every program of the network's nodes and services."""
        return {h: self.program(h) for h in [*self.nodes, *self.services]}

    def program(self, host: str) -> Program:
        manifest = self.nodes.get(host) or self.services.get(host)
        if manifest is None:
            raise InputError(f"host {host!r} runs no node or service of {self.inventory.path}")
        return Program.from_manifest(manifest, f"{host}'s deployed manifest")

    # ---- programs ----------------------------------------------------------------------------
    def _sh(self, line: str) -> subprocess.CompletedProcess[str]:
        # supervisorctl beside this Python (the virtualenv's), as programs.argv(local=True).
        env = {**os.environ,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        try:
            return subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env,
                                  timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise FaultError(f"`{line}` did not finish in {COMMAND_TIMEOUT_S} s") from None

    def _act(self, host: str, line: str) -> None:
        proc = self._sh(line)
        if proc.returncode != 0:
            raise FaultError(f"{host}: `{line}` failed: {(proc.stderr or proc.stdout).strip()}")

    def stop(self, host: str) -> None:
        self._act(host, self.program(host).stop())

    def start(self, host: str) -> None:
        self._act(host, self.program(host).start())

    def running(self, host: str) -> bool:
        program = self.program(host)
        proc = self._sh(" ".join(program.argv("status" if program.supervisor else "is-active")))
        return program.running(proc.stdout)

    # ---- nodes -------------------------------------------------------------------------------
    def rpc(self, host: str) -> RpcClient:
        return RpcClient(f"http://127.0.0.1:{self.nodes[host]['rpc_port']}", timeout=5)

    def node_call(self, host: str, method: str, params: list[Any] | None = None) -> Any:
        return self.rpc(host).call(method, params)

    def peer_id(self, host: str) -> str:
        peer = str(self.nodes[host].get("peer_id") or "")
        if not peer:
            raise OpsError(f"{host}'s manifest names no peer id; converge it again")
        return peer

    def p2p_address(self, host: str) -> str:
        return f"/ip4/127.0.0.1/tcp/{self.nodes[host]['p2p_port']}/p2p/{self.peer_id(host)}"

    def head(self, host: str) -> tuple[int, str, int]:
        """(best number, best hash, finalized number) of a node."""
        client = self.rpc(host)
        best = str(client.call("chain_getBlockHash"))
        number = int(client.call("chain_getHeader", [best])["number"], 16)
        return number, best, client.finalized_number()

    def fork_depth(self, host: str, number: int, block_hash: str) -> int | None:
        """How many of the blocks up to ``block_hash`` (at ``number``) are off the chain that
        ``host`` now follows: 0 when it is on it, None when a header is not known."""
        client = self.rpc(host)
        depth = 0
        while depth <= MAX_FORK_DEPTH and number >= 0:
            if client.call("chain_getBlockHash", [number]) == block_hash:
                return depth
            header = client.call("chain_getHeader", [block_hash])
            if not header:
                return None
            block_hash, number, depth = str(header["parentHash"]), number - 1, depth + 1
        return None

    # ---- services ----------------------------------------------------------------------------
    def service_ready(self, host: str) -> tuple[bool, str]:
        """A service's ``/ready`` (a program without a public URL: running is ready)."""
        url = str(self.services.get(host, {}).get("public_url") or "")
        if not url:
            ok = self.running(host)
            return ok, "running" if ok else "not running"
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/ready",  # noqa: S310 - http only
                                        timeout=READY_TIMEOUT_S) as resp:
                return resp.status == 200, f"{url}/ready: {resp.status}"
        except urllib.error.HTTPError as exc:
            return False, f"{url}/ready: {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            return False, f"{url}/ready: {exc}"

    # ---- faucet ------------------------------------------------------------------------------
    def _prom_value(self, expr: str) -> float | None:
        from ops_tools.monitoring.alerts import query

        result = query(self.prometheus_url, expr)
        return float(result[0]["value"][1]) if result else None

    def _faucet_keypair(self, host: str) -> Any:
        from ops_tools.chain.keys import keypair_from_secret

        seed = self.inventory.hostvars.get(host, {}).get("faucet_seed")
        if not isinstance(seed, str) or not seed or "{{" in seed:
            raise InputError(f"{host}: faucet_seed is not a plain secret in the inventory; the"
                             " drill moves the faucet's balance with it")
        return keypair_from_secret(seed, key=f"{host}'s faucet_seed")

    def _substrate(self) -> Any:
        from ops_tools.chain.substrate import connect
        from ops_tools.chain.urls import ws_url

        # A WebSocket: waiting for a transfer's inclusion is a subscription.
        return connect(ws_url(str(self.rpc(self.public_host).url)), 30)

    def faucet_balance(self, host: str) -> tuple[int, int, int]:
        """(free balance on chain, drip size, the alert's threshold in drips)."""
        drip = self._prom_value(f'faucet_drip_plancks{{host="{host}"}}')
        if not drip:
            raise OpsError(f"Prometheus has no faucet_drip_plancks of {host}; is it scraped?")
        from ops_tools.monitoring.alerts import rule_expression

        expr = rule_expression(self.prometheus_url, "FaucetFewDripsLeft")
        match = re.search(r"<\s*(\d+)", expr or "")
        if match is None:
            raise OpsError(f"the rule FaucetFewDripsLeft ({expr!r}) has no '< N' threshold")
        substrate = self._substrate()
        try:
            account = substrate.query("System", "Account",
                                      [self._faucet_keypair(host).ss58_address])
            balance = int(account.value["data"]["free"])
        finally:
            substrate.close()
        return balance, int(drip), int(match.group(1))

    def _transfer(self, keypair: Any, call: str, params: dict[str, Any]) -> str:
        substrate = self._substrate()
        try:
            xt = substrate.create_signed_extrinsic(
                call=substrate.compose_call("Balances", call, params), keypair=keypair)
            receipt = substrate.submit_extrinsic(xt, wait_for_inclusion=True)
            if not receipt.is_success:
                raise FaultError(f"Balances.{call} failed in block {receipt.block_hash}:"
                                 f" {receipt.error_message}")
            return str(receipt.block_hash)
        finally:
            substrate.close()

    def _fee(self, holder: Any, dest: str, value: int) -> int:
        """The fee of moving ``value`` from ``holder`` (what the node's payment_queryInfo says)."""
        substrate = self._substrate()
        try:
            call = substrate.compose_call("Balances", "transfer_allow_death",
                                          {"dest": dest, "value": value})
            info = substrate.get_payment_info(call, holder)
            return int(info.get("partialFee", info.get("partial_fee", 0)))
        finally:
            substrate.close()

    def faucet_drain(self, host: str, keep: int) -> Facts:
        from substrateinterface import Keypair

        balance, _, _ = self.faucet_balance(host)
        secret_file = self.drill_dir / f"faucet-drain-{host}.secret"
        if secret_file.exists():  # a drain already under way: keep its holder (and funds)
            mnemonic = read_secret(secret_file, key="the drill's holding account")
        else:
            mnemonic = Keypair.generate_mnemonic()
            atomic.write_text(secret_file, mnemonic + "\n", mode=0o600)
        holder = Keypair.create_from_mnemonic(mnemonic)
        facts = {"holder": holder.ss58_address, "secret_file": str(secret_file),
                 "moved": balance - keep}
        # Journaled before the transfer: a drill killed during it is refilled from the holder.
        self.on_facts(facts)
        self._transfer(self._faucet_keypair(host), "transfer_keep_alive",
                       {"dest": holder.ss58_address, "value": balance - keep})
        return facts

    def faucet_refill(self, host: str, facts: Facts) -> str:
        secret_file = Path(str(facts.get("secret_file") or
                               self.drill_dir / f"faucet-drain-{host}.secret"))
        if not secret_file.exists():
            return "nothing to move back"
        from ops_tools.chain.keys import keypair_from_file

        holder = keypair_from_file(secret_file, key="the drill's holding account")
        faucet = self._faucet_keypair(host).ss58_address
        substrate = self._substrate()
        try:
            free = int(substrate.query("System", "Account",
                                       [holder.ss58_address]).value["data"]["free"])
        finally:
            substrate.close()
        if free:
            self._transfer(holder, "transfer_allow_death",
                           {"dest": faucet, "value": free - self._fee(holder, faucet, free)})
        secret_file.unlink()
        return f"moved {free} plancks (less the fee) back to {host}"

    def on_facts(self, facts: Facts) -> None:
        """Replaced by the runner: saves facts into the journal before a risky action."""

    def describe(self) -> dict[str, Any]:
        return {"inventory": str(self.inventory.path), "state": str(self.state),
                "prometheus_url": self.prometheus_url, "alertmanager_url": self.alertmanager_url,
                "monitored": self.monitored,
                "nodes": sorted(self.nodes), "services": sorted(self.services)}

