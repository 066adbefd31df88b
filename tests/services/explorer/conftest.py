"""The explorer's suite: a devnode, the attestation service and the explorer as processes, and
one operator onboarded with wallet-cli (attest, then register-operator with the hash)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.services.explorer.processes import Service, run_service
from tests.support.devnode import DevNode, fund
from tests.wallet.conftest import Wallet

TOKEN = 10**12


@dataclass
class Stack:
    node: DevNode
    attestation: Service
    explorer: Service
    wallet: Wallet
    operator: str  # the keystore name, the report's operator id
    address: str
    report_hash: str
    stake: int
    workdir: Path


@pytest.fixture(scope="module")
def stack(devnode: DevNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("explorer")
    seed = work / "seed"
    seed.write_text("explorer-test-seed-0f1e2d3c4b5a6978\n")
    os.chmod(seed, 0o600)
    with run_service("attestation", work / "attestation", {
        "rpc_url": devnode.ws, "mock_root_seed_file": str(seed),
    }) as attestation, run_service("explorer", work / "explorer", {
        "rpc_url": devnode.ws, "attestation_url": attestation.url, "page_size": 3,
        "anchor_cache_s": 0,
    }) as explorer:
        wallet = Wallet(work / "keystore")
        created = wallet.run("new", "op-explorer", "--json")
        assert created.returncode == 0, created.stderr
        address = created.json()["ss58_address"]
        fund(devnode, {address: 5 * TOKEN})
        attested = wallet.run("attest", "op-explorer", "--attestation-url", attestation.url)
        assert attested.returncode == 0, attested.stderr
        report_hash = attested.stdout.strip()
        stake = 2 * TOKEN
        registered = wallet.run("register-operator", "op-explorer", "--stake", str(stake),
                                "--attestation-hash", report_hash, "--rpc-url", devnode.ws,
                                "--json")
        assert registered.returncode == 0, registered.stderr + registered.stdout
        yield Stack(devnode, attestation, explorer, wallet, "op-explorer", address,
                    report_hash, stake, work)
