"""The Substrate JSON-RPC methods the suite and substrate-interface use."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.scale import encode_bytes
from ops_tools.devnode.chain import Head, header_json
from ops_tools.devnode.crypto import account_from_ss58
from ops_tools.devnode.keystore import KEY_TYPES
from ops_tools.devnode.rpc.server import Connection, Handler, RpcError, invalid_params
from ops_tools.devnode.runtime.apis import BY_CALL_NAME as RUNTIME_CALLS
from ops_tools.devnode.runtime.apis import METADATA_VERSIONS
from ops_tools.devnode.runtime.dispatch import call_weight
from ops_tools.devnode.runtime.executive import fee_of
from ops_tools.devnode.runtime.extrinsic import InvalidTransaction, decode_extrinsic
from ops_tools.devnode.runtime.state import State
from ops_tools.devnode.runtime.types import DecodeError
from ops_tools.errors import OpsError

if TYPE_CHECKING:
    from ops_tools.devnode.node import Node

UNSAFE = {
    "author_insertKey",
    "author_rotateKeys",
    "author_hasKey",
    "author_hasSessionKeys",
    "author_removeExtrinsic",
    "system_peers",
    "system_addReservedPeer",
    "system_removeReservedPeer",
    "system_networkState",
    "devnode_blockedPeers",
    "system_addLogFilter",
    "system_resetLogFilter",
}


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _bytes(value: Any, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, str):
        raise invalid_params(f"{what}: expected a 0x-prefixed hex string")
    try:
        raw = bytes.fromhex(value.removeprefix("0x"))
    except ValueError:
        raise invalid_params(f"{what}: not hex") from None
    if length is not None and len(raw) != length:
        raise invalid_params(f"{what}: expected {length} bytes, got {len(raw)}")
    return raw


def _arg(params: list[Any], i: int, default: Any = None) -> Any:
    return params[i] if len(params) > i else default


def _no_params(f: Callable[[], Any]) -> Handler:
    return lambda params, conn: f()


class Api:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.chain = node.chain
        self._runtime_calls = self._runtime_call_handlers()
        if set(self._runtime_calls) != set(RUNTIME_CALLS):
            raise AssertionError("runtime API handlers and declarations (runtime.apis) differ")

    # ---- helpers ------------------------------------------------------------------------------
    def _at(self, value: Any) -> bytes:
        if value is None:
            return self.chain.best.hash
        h = _bytes(value, "block hash", 32)
        if self.chain.header(h) is None:
            raise RpcError(4003, "Client error: UnknownBlock: header not found", _hex(h))
        return h

    def _state(self, value: Any) -> State:
        state = self.chain.state(self._at(value))
        if state is None:
            raise RpcError(4003, "Client error: UnknownBlock: state not available")
        return state

    def runtime_version(self) -> dict[str, Any]:
        rt = self.chain.spec.runtime
        return {
            "specName": rt.spec_name,
            "implName": rt.impl_name,
            "authoringVersion": rt.authoring_version,
            "specVersion": rt.spec_version,
            "implVersion": rt.impl_version,
            "apis": [[i, v] for i, v in rt.apis],
            "transactionVersion": rt.transaction_version,
            "stateVersion": rt.state_version,
        }

    # ---- rpc / system -------------------------------------------------------------------------
    def rpc_methods(self, p: list[Any], c: Connection) -> Any:
        # The dev node's own extensions (devnode_*) stay unlisted: a Substrate node has none,
        # and polkadot.js warns about every listed method it does not know.
        return {
            "version": 1,
            "methods": sorted(m for m in self.methods() if not m.startswith("devnode_")),
        }

    def system_health(self, p: list[Any], c: Connection) -> Any:
        return {
            "peers": self.node.peer_count(),
            "isSyncing": self.node.is_syncing(),
            "shouldHavePeers": self.chain.spec.chain_type != "Development",
        }

    def system_peers(self, p: list[Any], c: Connection) -> Any:
        return self.node.peers_info()

    def system_sync_state(self, p: list[Any], c: Connection) -> Any:
        best = self.chain.best.number
        return {
            "startingBlock": self.node.starting_block,
            "currentBlock": best,
            "highestBlock": max(best, self.node.highest_seen()),
        }

    def system_account_next_index(self, p: list[Any], c: Connection) -> Any:
        who = _arg(p, 0)
        try:
            account = (
                bytes.fromhex(who[2:])
                if isinstance(who, str) and who.startswith("0x")
                else account_from_ss58(who, "account")
            )
        except (OpsError, ValueError) as exc:
            raise invalid_params(str(exc)) from None
        return self.node.pool.next_index(account)

    def system_add_reserved_peer(self, p: list[Any], c: Connection) -> Any:
        address = _arg(p, 0)
        if not isinstance(address, str) or self.node.network is None:
            raise invalid_params("expected a multiaddr /ip4/<ip>/tcp/<port>/p2p/<peer id>")
        try:
            self.node.network.add_reserved_peer(address)
        except OpsError as exc:
            raise invalid_params(str(exc)) from None
        return None

    def system_remove_reserved_peer(self, p: list[Any], c: Connection) -> Any:
        peer = _arg(p, 0)
        if not isinstance(peer, str) or not peer or self.node.network is None:
            raise invalid_params("expected a peer id")
        self.node.network.remove_reserved_peer(peer)
        return None

    def devnode_blocked_peers(self, p: list[Any], c: Connection) -> Any:
        return sorted(self.node.network.blocked) if self.node.network else []

    # ---- chain --------------------------------------------------------------------------------
    def chain_get_block_hash(self, p: list[Any], c: Connection) -> Any:
        arg = _arg(p, 0)
        if arg is None:
            return _hex(self.chain.best.hash)
        if isinstance(arg, list):
            return [self._hash_of(n) for n in arg]
        return self._hash_of(arg)

    def _hash_of(self, n: Any) -> Any:
        if isinstance(n, str):
            try:
                n = int(n, 16) if n.startswith("0x") else int(n)
            except ValueError:
                raise invalid_params(f"block number {n!r} is not a number") from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n >= 1 << 32:
            raise invalid_params(f"block number {n!r} is not a u32")
        h = self.chain.canon_hash(n)
        return _hex(h) if h else None

    def chain_get_header(self, p: list[Any], c: Connection) -> Any:
        h = self.chain.best.hash if _arg(p, 0) is None else _bytes(p[0], "block hash", 32)
        header = self.chain.header(h)
        return header_json(header) if header else None

    def chain_get_block(self, p: list[Any], c: Connection) -> Any:
        h = self.chain.best.hash if _arg(p, 0) is None else _bytes(p[0], "block hash", 32)
        header = self.chain.header(h)
        if header is None:
            return None
        just = self.chain.justification(h)
        return {
            "block": {
                "header": header_json(header),
                "extrinsics": [_hex(x) for x in self.chain.body(h) or []],
            },
            "justifications": [[list(b"FRNK"), _hex(just)]] if just else None,
        }

    def chain_get_finalized_head(self, p: list[Any], c: Connection) -> Any:
        return _hex(self.chain.finalized.hash)

    def _subscribe(
        self, c: Connection, hub: list[Callable[[Head], None]], method: str, initial: Head | None
    ) -> str:
        if not c.can_subscribe:
            raise RpcError(-32601, "Method not found", "subscriptions need a WebSocket connection")
        stream = c.stream(method)

        def push(head: Head) -> None:
            stream.send(header_json(head.header))

        hub.append(push)
        c.subscriptions[stream.id] = lambda: hub.remove(push) if push in hub else None
        if initial is not None:
            push(initial)
        return stream.id

    def _unsubscribe(self, p: list[Any], c: Connection) -> Any:
        cancel = c.subscriptions.pop(_arg(p, 0), None) if isinstance(_arg(p, 0), str) else None
        if cancel is None:
            return False
        cancel()
        return True

    def chain_subscribe_new_heads(self, p: list[Any], c: Connection) -> Any:
        return self._subscribe(c, self.node.new_heads, "chain_newHead", self.chain.best)

    def chain_subscribe_all_heads(self, p: list[Any], c: Connection) -> Any:
        return self._subscribe(c, self.node.all_heads, "chain_allHead", None)

    def chain_subscribe_finalized_heads(self, p: list[Any], c: Connection) -> Any:
        return self._subscribe(
            c, self.node.finalized_heads, "chain_finalizedHead", self.chain.finalized
        )

    # ---- state --------------------------------------------------------------------------------
    def state_get_runtime_version(self, p: list[Any], c: Connection) -> Any:
        self._at(_arg(p, 0))
        return self.runtime_version()

    def state_get_metadata(self, p: list[Any], c: Connection) -> Any:
        self._at(_arg(p, 0))
        return _hex(self.chain.metadata())

    def state_get_storage(self, p: list[Any], c: Connection) -> Any:
        key = _bytes(_arg(p, 0), "storage key")
        value = self._state(_arg(p, 1)).data.get(key)
        return _hex(value) if value is not None else None

    def state_get_storage_hash(self, p: list[Any], c: Connection) -> Any:
        value = self._state(_arg(p, 1)).data.get(_bytes(_arg(p, 0), "storage key"))
        return _hex(blake2_256(value)) if value is not None else None

    def state_get_storage_size(self, p: list[Any], c: Connection) -> Any:
        value = self._state(_arg(p, 1)).data.get(_bytes(_arg(p, 0), "storage key"))
        return len(value) if value is not None else None

    def state_get_keys_paged(self, p: list[Any], c: Connection) -> Any:
        prefix = _bytes(_arg(p, 0, "0x"), "prefix")
        count = _arg(p, 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise invalid_params("count: expected a non-negative integer")
        if count > 1000 and not self.node.allow_unsafe:
            raise RpcError(-32601, "RPC call is unsafe to be called externally", "count above 1000")
        start = _bytes(_arg(p, 2), "start key") if _arg(p, 2) else b""
        state = self._state(_arg(p, 3))
        keys = sorted(k for k in state.data if k.startswith(prefix) and k > start)
        return [_hex(k) for k in keys[:count]]

    def state_get_keys(self, p: list[Any], c: Connection) -> Any:
        prefix = _bytes(_arg(p, 0, "0x"), "prefix")
        return [_hex(k) for k in sorted(self._state(_arg(p, 1)).data) if k.startswith(prefix)]

    def state_query_storage_at(self, p: list[Any], c: Connection) -> Any:
        keys = _arg(p, 0)
        if not isinstance(keys, list):
            raise invalid_params("keys: expected an array of hex keys")
        at = self._at(_arg(p, 1))
        state = self._state(_hex(at))
        changes = []
        for k in keys:
            value = state.data.get(_bytes(k, "storage key"))
            changes.append([k, _hex(value) if value is not None else None])
        return [{"block": _hex(at), "changes": changes}]

    def state_call(self, p: list[Any], c: Connection) -> Any:
        method = _arg(p, 0)
        data = _bytes(_arg(p, 1, "0x"), "call data")
        state = self._state(_arg(p, 2))
        declared = RUNTIME_CALLS.get(method) if isinstance(method, str) else None
        if declared is None:
            raise RpcError(
                -32000, "Client error: Execution failed", f"unknown runtime api method {method!r}"
            )
        try:
            args = declared.decode_args(data)
        except (DecodeError, OpsError, ValueError) as exc:
            raise RpcError(
                -32000,
                "Client error: Execution failed",
                f"{method}: cannot decode the arguments: {exc}",
            ) from None
        return _hex(declared.output.encode(self._runtime_calls[method](state, *args)))

    def _runtime_call_handlers(self) -> dict[str, Callable[..., Any]]:
        """One handler per runtime API method declared in ``runtime.apis`` (checked at start)."""

        def nonce(state: State, account: bytes) -> int:
            return int(state.get("System", "Account", account)["nonce"])

        def version(state: State) -> dict[str, Any]:
            rt = self.chain.spec.runtime
            return {
                "spec_name": rt.spec_name,
                "impl_name": rt.impl_name,
                "authoring_version": rt.authoring_version,
                "spec_version": rt.spec_version,
                "impl_version": rt.impl_version,
                "apis": [(bytes.fromhex(i.removeprefix("0x")), v) for i, v in rt.apis],
                "transaction_version": rt.transaction_version,
                "system_version": rt.state_version,
            }

        def at_version(state: State, v: int) -> bytes | None:
            return self.chain.metadata(v) if v in METADATA_VERSIONS else None

        def query_info(state: State, uxt: bytes, length: int) -> dict[str, Any]:
            info = self._query_info(encode_bytes(uxt))
            return {
                "weight": info["weight"],
                "class": "Normal",
                "partial_fee": int(info["partialFee"]),
            }

        return {
            "Core_version": version,
            "Metadata_metadata": lambda state: self.chain.metadata(),
            "Metadata_metadata_at_version": at_version,
            "Metadata_metadata_versions": lambda state: list(METADATA_VERSIONS),
            "AccountNonceApi_account_nonce": nonce,
            "TransactionPaymentApi_query_info": query_info,
        }

    def _query_info(self, encoded: bytes) -> dict[str, Any]:
        try:
            xt = decode_extrinsic(encoded)
        except InvalidTransaction as exc:
            raise invalid_params(exc.reason) from None
        return {
            "weight": {"ref_time": call_weight(xt.call), "proof_size": 0},
            "class": "normal",
            "partialFee": str(fee_of(self.chain.config, xt) - xt.tip),
        }

    def payment_query_info(self, p: list[Any], c: Connection) -> Any:
        return self._query_info(_bytes(_arg(p, 0), "extrinsic"))

    def state_subscribe_runtime_version(self, p: list[Any], c: Connection) -> Any:
        if not c.can_subscribe:
            raise RpcError(-32601, "Method not found", "subscriptions need a WebSocket connection")
        stream = c.stream("state_runtimeVersion")
        c.subscriptions[stream.id] = lambda: None
        stream.send(self.runtime_version())
        return stream.id

    def state_subscribe_storage(self, p: list[Any], c: Connection) -> Any:
        if not c.can_subscribe:
            raise RpcError(-32601, "Method not found", "subscriptions need a WebSocket connection")
        keys = [_bytes(k, "storage key") for k in (_arg(p, 0) or [])]
        stream = c.stream("state_storage")
        last: dict[bytes, bytes | None] = {}

        def push(head: Head) -> None:
            state = self.chain.state(head.hash)
            if state is None:
                return
            changes = []
            for k in keys:
                v = state.data.get(k)
                if k not in last or last[k] != v:
                    changes.append([_hex(k), _hex(v) if v is not None else None])
                last[k] = v
            if changes:
                stream.send({"block": _hex(head.hash), "changes": changes})

        self.node.new_heads.append(push)
        c.subscriptions[stream.id] = lambda: (
            self.node.new_heads.remove(push) if push in self.node.new_heads else None
        )
        push(self.chain.best)
        return stream.id

    # ---- author -------------------------------------------------------------------------------
    def author_submit_extrinsic(self, p: list[Any], c: Connection) -> Any:
        encoded = _bytes(_arg(p, 0), "extrinsic")
        try:
            return _hex(self.node.pool.submit(encoded))
        except InvalidTransaction as exc:
            raise RpcError(exc.code, exc.message, exc.reason) from None

    def author_submit_and_watch_extrinsic(self, p: list[Any], c: Connection) -> Any:
        if not c.can_subscribe:
            raise RpcError(-32601, "Method not found", "subscriptions need a WebSocket connection")
        encoded = _bytes(_arg(p, 0), "extrinsic")
        stream = c.stream("author_extrinsicUpdate")
        watching = {"on": True}

        def watcher(status: Any) -> None:
            if watching["on"]:
                stream.send(status)

        try:
            self.node.pool.submit(encoded, watcher)
        except InvalidTransaction as exc:
            raise RpcError(exc.code, exc.message, exc.reason) from None
        c.subscriptions[stream.id] = lambda: watching.update(on=False)
        return stream.id

    def author_pending_extrinsics(self, p: list[Any], c: Connection) -> Any:
        return [_hex(x) for x in self.node.pool.pending()]

    def author_insert_key(self, p: list[Any], c: Connection) -> Any:
        key_type, suri, public = _arg(p, 0), _arg(p, 1), _arg(p, 2)
        if not isinstance(key_type, str) or not isinstance(suri, str):
            raise invalid_params("expected [key_type, suri, public]")
        pub = _bytes(public, "public key", 32)
        try:
            pair = self.node.keystore.insert(key_type, suri, KEY_TYPES.get(key_type, "Sr25519"))
        except OpsError as exc:
            raise invalid_params(str(exc)) from None
        if pair.public != pub:
            raise invalid_params("the public key does not match the secret URI for this key type")
        self.node.keys_changed()
        return None

    def author_has_key(self, p: list[Any], c: Connection) -> Any:
        pub = _bytes(_arg(p, 0), "public key", 32)
        key_type = _arg(p, 1)
        if not isinstance(key_type, str):
            raise invalid_params("key type: expected a string such as aura")
        return self.node.keystore.has(key_type, pub)

    def author_rotate_keys(self, p: list[Any], c: Connection) -> Any:
        out = b""
        for key_type in ("aura", "gran"):
            # A fresh random seed per key; it lives only in the keystore file (mode 0600).
            out += self.node.keystore.insert(
                key_type, "0x" + os.urandom(32).hex(), KEY_TYPES[key_type]
            ).public
        self.node.keys_changed()
        return _hex(out)

    def author_has_session_keys(self, p: list[Any], c: Connection) -> Any:
        keys = _bytes(_arg(p, 0), "session keys", 64)
        return self.node.keystore.has("aura", keys[:32]) and self.node.keystore.has(
            "gran", keys[32:]
        )

    # ---- table --------------------------------------------------------------------------------
    def methods(self) -> dict[str, Handler]:
        n = self.node
        simple: dict[str, Callable[[], Any]] = {
            "system_name": lambda: "devnode",
            "system_version": lambda: n.version,
            "system_chain": lambda: self.chain.spec.name,
            "system_chainType": lambda: self.chain.spec.chain_type,
            "system_properties": lambda: self.chain.spec.properties,
            "system_localPeerId": lambda: n.peer_id,
            "system_localListenAddresses": lambda: n.listen_addresses(),
            "system_nodeRoles": lambda: ["Authority" if n.validator else "Full"],
            "chain_getRuntimeVersion": self.runtime_version,
        }
        table: dict[str, Handler] = {k: _no_params(f) for k, f in simple.items()}
        table.update(
            {
                "rpc_methods": self.rpc_methods,
                "system_health": self.system_health,
                "system_peers": self.system_peers,
                "system_syncState": self.system_sync_state,
                "system_accountNextIndex": self.system_account_next_index,
                "system_addReservedPeer": self.system_add_reserved_peer,
                "system_removeReservedPeer": self.system_remove_reserved_peer,
                "devnode_blockedPeers": self.devnode_blocked_peers,
                "chain_getBlockHash": self.chain_get_block_hash,
                "chain_getHead": self.chain_get_block_hash,
                "chain_getHeader": self.chain_get_header,
                "chain_getBlock": self.chain_get_block,
                "chain_getFinalizedHead": self.chain_get_finalized_head,
                "chain_getFinalisedHead": self.chain_get_finalized_head,
                "chain_subscribeNewHeads": self.chain_subscribe_new_heads,
                "chain_subscribeNewHead": self.chain_subscribe_new_heads,
                "chain_unsubscribeNewHeads": self._unsubscribe,
                "chain_unsubscribeNewHead": self._unsubscribe,
                "chain_subscribeAllHeads": self.chain_subscribe_all_heads,
                "chain_unsubscribeAllHeads": self._unsubscribe,
                "chain_subscribeFinalizedHeads": self.chain_subscribe_finalized_heads,
                "chain_subscribeFinalisedHeads": self.chain_subscribe_finalized_heads,
                "chain_unsubscribeFinalizedHeads": self._unsubscribe,
                "chain_unsubscribeFinalisedHeads": self._unsubscribe,
                "state_getRuntimeVersion": self.state_get_runtime_version,
                "state_getMetadata": self.state_get_metadata,
                "state_getStorage": self.state_get_storage,
                "state_getStorageAt": self.state_get_storage,
                "state_getStorageHash": self.state_get_storage_hash,
                "state_getStorageSize": self.state_get_storage_size,
                "state_getKeysPaged": self.state_get_keys_paged,
                "state_getKeys": self.state_get_keys,
                "state_queryStorageAt": self.state_query_storage_at,
                "state_call": self.state_call,
                "state_subscribeRuntimeVersion": self.state_subscribe_runtime_version,
                "state_unsubscribeRuntimeVersion": self._unsubscribe,
                "state_subscribeStorage": self.state_subscribe_storage,
                "state_unsubscribeStorage": self._unsubscribe,
                "payment_queryInfo": self.payment_query_info,
                "author_submitExtrinsic": self.author_submit_extrinsic,
                "author_submitAndWatchExtrinsic": self.author_submit_and_watch_extrinsic,
                "author_unwatchExtrinsic": self._unsubscribe,
                "author_pendingExtrinsics": self.author_pending_extrinsics,
                "author_insertKey": self.author_insert_key,
                "author_hasKey": self.author_has_key,
                "author_rotateKeys": self.author_rotate_keys,
                "author_hasSessionKeys": self.author_has_session_keys,
            }
        )
        return table
