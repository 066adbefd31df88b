"""A WebSocket client through the edge that verifies its certificate against the scenario's test
CA: it subscribes to new heads over wss://<name>/ (connecting to the host's address) and asks
for an unsafe method; prints what it saw as JSON for verify.yml to judge."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys

from websockets.asyncio.client import connect


async def main(name: str, address: str, ca: str) -> dict[str, object]:
    ctx = ssl.create_default_context(cafile=ca)
    async with connect(f"wss://{name}/", host=address, port=443, ssl=ctx,
                       server_hostname=name, open_timeout=10) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads",
                                  "params": []}))
        sub = json.loads(await asyncio.wait_for(ws.recv(), 10))["result"]
        heads: list[int] = []
        while len(heads) < 2:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if msg.get("params", {}).get("subscription") == sub:
                heads.append(int(msg["params"]["result"]["number"], 16))
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "author_rotateKeys",
                                  "params": []}))
        while True:
            unsafe = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if unsafe.get("id") == 2:
                break
        return {"heads": heads, "unsafe": unsafe}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
