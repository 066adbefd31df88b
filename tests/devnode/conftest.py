"""Fixtures of the development node suite: real ``devnode`` processes on loopback ports.

The process harness lives in ``tests.support.devnode`` so that benchmarks (and other suites
that need a running chain) start nodes the same way.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.devnode import DevNode, free_port, plain_spec
from tests.support.devnode import devnode as _devnode

BIN = Path(sys.executable).parent
OPS_TOOLS = str(BIN / "ops-tools")
Node = DevNode
__all__ = ["OPS_TOOLS", "Node", "free_port", "make_plain_spec", "rpc", "run"]


def run(
    *args: str, input: str | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    proc = _devnode(*args, stdin=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"devnode {' '.join(args)} failed: {proc.stderr}")
    return proc


make_plain_spec = plain_spec


def rpc(url: str, method: str, params: list | None = None) -> object:
    reply = requests.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}, timeout=10
    ).json()
    if "error" in reply:
        raise AssertionError(f"{method}: {reply['error']}")
    return reply["result"]


@pytest.fixture(scope="session")
def plain_spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_plain_spec(tmp_path_factory.mktemp("spec") / "plain.json")


@pytest.fixture(scope="session")
def raw_spec(plain_spec_path: Path) -> Path:
    out = plain_spec_path.with_name("raw.json")
    out.write_text(
        run(
            "build-spec",
            "--chain",
            str(plain_spec_path),
            "--raw",
            "--disable-default-bootnode",
            check=True,
        ).stdout
    )
    return out


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory, raw_spec: Path) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("node") / "base", str(raw_spec))
    n.start()
    try:
        n.wait_for(lambda: n.best() >= 1, what="the first block")
        yield n
    finally:
        n.stop()


@pytest.fixture
def substrate(node: Node) -> Iterator[object]:
    from substrateinterface import SubstrateInterface

    s = SubstrateInterface(url=node.ws)
    try:
        yield s
    finally:
        s.close()
