"""The genesis preflight of playbooks/full_node.yml, for real over SSH: a spec of another genesis,
an unreachable public endpoint and a bad checksum each stop the play before anything is
installed or started on the host."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import ROOT, free_port
from tests.operator.conftest import (
    DEVNODE,
    HOST,
    VENV_BIN,
    ArtifactServer,
    LocalNet,
    Operator,
    Rendered,
    Sshd,
    rpc,
)


def assert_stopped_before_host(op: Operator, result) -> None:
    assert result.rc != 0, result.output
    assert result.recap[HOST]["failed"] == 1, result.stdout
    assert op.nothing_installed(), "the play touched the host before the preflight passed"
    # No node answers where the full node would have: nothing was started.
    assert not _answers(op.rpc_url)


def _answers(url: str) -> bool:
    try:
        rpc(url, "system_health", timeout=1)
    except OSError:
        return False
    return True


def test_mismatched_genesis_stops_before_anything_with_both_hashes_and_remediation(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator
):
    localnet.start(specs["current"])
    result = operator.play(specs["other"], localnet.rpc_url, localnet.bootnodes)
    assert_stopped_before_host(operator, result)
    out = " ".join(result.output.split())
    assert "genesis mismatch" in out
    assert specs["other"].genesis in out  # the spec's, computed offline
    assert specs["current"].genesis in out  # the public node's
    assert localnet.rpc_url in out
    assert "rebuild it against the main branch of the pallet-suite" in out
    assert "nothing was installed or started" in out


def test_unreachable_public_endpoint_names_the_url_and_starts_nothing(
    specs: dict[str, Rendered], operator: Operator
):
    dead = f"ws://127.0.0.1:{free_port()}"
    result = operator.play(specs["current"], dead)
    assert_stopped_before_host(operator, result)
    out = " ".join(result.output.split())
    assert f"public RPC endpoint {dead} (from environment variable NET_RPC_URL)" in out
    assert "nothing was installed or started" in out


def test_per_host_endpoint_overrides_net_rpc_url(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator
):
    localnet.start(specs["current"])
    dead = f"wss://127.0.0.1:{free_port()}"
    # $NET_RPC_URL is right, but the inventory's per-host endpoint wins (and is dead).
    result = operator.play(specs["current"], localnet.rpc_url, localnet.bootnodes,
                           genesis_preflight_rpc_url=dead)
    assert_stopped_before_host(operator, result)
    assert f"public RPC endpoint {dead} (from inventory variable genesis_preflight_rpc_url)" in (
        " ".join(result.output.split())
    )


def test_wrong_chainspec_checksum_is_refused_before_the_host(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator
):
    localnet.start(specs["current"])
    result = operator.play(specs["current"], localnet.rpc_url, localnet.bootnodes,
                           genesis_preflight_chainspec_sha256=specs["other"].sha256)
    assert_stopped_before_host(operator, result)
    out = " ".join(result.output.split())
    assert f"sha256 is {specs['current'].sha256}, expected {specs['other'].sha256}" in out
    assert "genesis_preflight_chainspec_sha256" in out


def test_downloaded_binary_with_another_checksum_is_refused_before_the_host(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator, artifacts: ArtifactServer
):
    localnet.start(specs["current"])
    url = artifacts.publish(DEVNODE, "tampered/net-node")
    result = operator.play(specs["current"], localnet.rpc_url, localnet.bootnodes,
                           genesis_preflight_binary_src=url,
                           genesis_preflight_binary_sha256="ab" * 32)
    assert_stopped_before_host(operator, result)
    out = " ".join(result.output.split())
    assert "Download the node binary" in out
    assert "ab" * 32 in out and "checksum" in out.lower()


def test_example_inventory_as_shipped_names_the_checksums_to_fill_in(sshd: Sshd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "NET_"))}
    env.update(HOME=str(sshd.home), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "inventories/operator",
         "playbooks/full_node.yml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert ("genesis_preflight_binary_sha256 is REPLACE-with-the-published-sha256-of-the-binary,"
            " expected 64 hex digits") in out
    assert "genesis_preflight_chainspec_sha256 is REPLACE-with" in out
    assert "UNREACHABLE" not in out  # refused on the controller, before any connection
