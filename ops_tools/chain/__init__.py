"""Talking to live nodes: genesis hash, heights, finality, peers, version.

Health checks and waits need no metadata, so this speaks plain JSON-RPC over HTTP (which every
Substrate node serves on its RPC port next to WebSocket) instead of opening a substrate-interface
session; the wallet, which signs extrinsics, uses substrate-interface.
"""

from ops_tools.chain.rpc import RpcClient, RpcError

__all__ = ["RpcClient", "RpcError"]
