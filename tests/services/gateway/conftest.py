"""Fixtures of the gateway suites: one chain, a gateway and a keystore-backed worker."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from substrateinterface import Keypair

from ops_tools.services.gateway import store
from ops_tools.services.gateway.database import open_database
from ops_tools.services.gateway.locate import database_url
from tests.support.devnode import DevNode

from .harness import (
    BIN,
    Gateway,
    WorkerProc,
    live_models,
    start_chain,
    start_gateway,
    start_worker,
    transfer,
    wait_for,
)

TOKEN = 10**12
PASSPHRASE = "gateway suite passphrase"


@pytest.fixture(scope="session")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    node = start_chain(tmp_path_factory.mktemp("chain"))
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def keystore_operator(tmp_path_factory: pytest.TempPathFactory, chain: DevNode) -> tuple[Path, str]:
    """A wallet-cli keystore account, funded: the worker unlocks it like an operator's would."""
    root = tmp_path_factory.mktemp("wallet")
    keystore = root / "keystore"
    mnemonic = Keypair.generate_mnemonic()
    (root / "mnemonic").write_text(mnemonic)
    (root / "pass").write_text(PASSPHRASE)
    (root / "pass").chmod(0o600)
    proc = subprocess.run(
        [str(BIN / "wallet-cli"), "import", "op", "--mnemonic-file", str(root / "mnemonic"),
         "--passphrase-file", str(root / "pass"), "--json"],
        env={"NET_KEYSTORE": str(keystore), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True, timeout=120,
    )
    (root / "mnemonic").unlink()
    address = Keypair.create_from_mnemonic(mnemonic, ss58_format=42).ss58_address
    assert address in proc.stdout
    transfer(chain, "//Alice", address, 10 * TOKEN)
    return keystore, address


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, chain: DevNode) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("gateway")
    gw = start_gateway(root, chain, f"sqlite:///{root / 'gw.sqlite3'}")
    try:
        yield gw
    finally:
        gw.proc.stop()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, chain: DevNode, gateway: Gateway,
           keystore_operator: tuple[Path, str]) -> Iterator[WorkerProc]:
    keystore, address = keystore_operator
    w = start_worker(tmp_path_factory.mktemp("worker"), chain, gateway.url, name="w1",
                     keystore=keystore, account="op", passphrase=PASSPHRASE,
                     register_stake=2 * TOKEN)
    try:
        assert w.operator == address
        wait_for(lambda: live_models(gateway).get("net-test-chat"), 90,
                 "the worker to be live at the gateway")
        yield w
    finally:
        w.proc.stop()


@pytest.fixture(scope="module")
def engine(gateway: Gateway):
    return open_database(database_url(gateway.config), pool_size=2).engine


def make_key(engine, account: str = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY",
             **limits: int | None) -> str:
    key, _ = store.create_key(engine, account, budget=limits.get("budget"),
                              rpm=limits.get("rpm"), tpm=limits.get("tpm"))
    return key
