"""The main job end to end: ``ops-tools localnet up`` on inventories/local, as a newcomer runs it.

Real processes only: the development node under a project-owned supervisord, converged by the
real playbooks. The network is the suite's shared default one (a temporary NET_LOCALNET_DIR,
purged at the end of the session).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from ops_tools.chain.rpc import RpcClient
from ops_tools.chainspec.header import DIGEST_PRE_RUNTIME, DigestItem
from ops_tools.chainspec.scale import Reader
from ops_tools.deploy.paths import supervisor_conf
from ops_tools.deploy.supervisor_rpc import Supervisor
from tests.conftest import ROOT
from tests.devnode_js import client as js_client

pytestmark = pytest.mark.slow
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
PUBLIC = "http://127.0.0.1:9944"


def ops(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OPS_TOOLS), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
        check=False,
    )


# On the shared default network (tests/localnet.py), after the other modules that share it:
# these tests stop programs, and the network as a whole, and leave it running again.
SHARED_NETWORK_LAST = True


@pytest.fixture(scope="module")
def localnet(shared_localnet):
    net = shared_localnet()
    return net.env, net.up, net.state


def slot_of(header: dict) -> int:
    for log in header["digest"]["logs"]:
        item = DigestItem.decode(Reader(bytes.fromhex(log[2:])))
        if item.kind == DIGEST_PRE_RUNTIME and item.engine == b"aura":
            return int.from_bytes(item.data[:8], "little")
    raise AssertionError(f"no aura pre-runtime digest in {header}")


def test_public_endpoint_serves_the_rendered_genesis_with_finality(localnet):
    _env, result, state = localnet
    rendered = json.loads((state / "chainspec" / "manifest.json").read_text())
    client = RpcClient(PUBLIC)
    assert client.genesis_hash() == rendered["genesis_hash"] == result["genesis_hash"]
    start = client.finalized_number()
    deadline = time.monotonic() + 60
    while client.finalized_number() <= start:
        assert time.monotonic() < deadline, "finality did not advance on the public endpoint"
        time.sleep(0.5)
    roles = sorted(e["role"] for e in result["endpoints"])
    assert roles == ["authority", "authority", "rpc"]
    # The public URLs: the RPC endpoint, and one <service>_url per public service deployed.
    assert result["public"]["rpc_url"] == "ws://127.0.0.1:9944"
    assert {f"{s['service']}_url" for s in result["services"]} == set(result["public"]) - {
        "rpc_url"}


def test_docs_site_publishes_the_genesis_the_network_serves(localnet, tmp_path):
    """The release page lists chain_getBlockHash [0]; its raw.json has the listed sha256 and,
    computed offline, that genesis hash."""
    _env, result, _state = localnet
    docs = result["public"]["docs_url"]
    assert result["public"]["rpc_url"] == "ws://127.0.0.1:9944"
    served = RpcClient(PUBLIC).call("chain_getBlockHash", [0])
    with urllib.request.urlopen(docs + "/releases/", timeout=10) as resp:
        page = html.unescape(re.sub(r"<[^>]+>", " ", resp.read().decode()))
    assert re.search(rf"Genesis hash\s+{served}\s", page), page
    listed = re.search(r"raw\.json\s+raw chain spec\s+([0-9a-f]{64})", page)
    assert listed is not None, page
    with urllib.request.urlopen(docs + "/releases/current/raw.json", timeout=10) as resp:
        raw = resp.read()
    assert hashlib.sha256(raw).hexdigest() == listed.group(1)
    (tmp_path / "raw.json").write_bytes(raw)
    offline = ops("chainspec", "genesis-hash", str(tmp_path / "raw.json"), env=os.environ.copy())
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip() == served


def test_both_authorities_author(localnet):
    client = RpcClient(PUBLIC)
    best = client.best_number()
    deadline = time.monotonic() + 60
    while client.best_number() < best + 4:
        assert time.monotonic() < deadline, "blocks stopped"
        time.sleep(0.5)
    authors = set()
    number = client.best_number()
    for n in range(number - 3, number + 1):
        header = client.call("chain_getHeader", [client.call("chain_getBlockHash", [n])])
        authors.add(slot_of(header) % 2)
    assert authors == {0, 1}


def test_polkadot_js_client_on_the_public_endpoint(localnet):
    # The script of tests/devnode_js, unchanged, against the public RPC node: finality there
    # needs both authorities' votes, gossiped to a node that authors nothing.
    problem = js_client.ensure_installed()
    assert not problem, problem
    symbol = yaml.safe_load((ROOT / "chainspec" / "networks" / "local.yml").read_text())["token"]
    report = js_client.run_client_suite(PUBLIC.replace("http://", "ws://"))
    js_client.check_report(report, token_symbol=symbol["symbol"])


def test_second_up_changes_nothing(localnet):
    env, _, _ = localnet
    # The playbook itself, though its inputs did not change: idempotent.
    again = ops("localnet", "up", "--json", "--converge", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["changed"] == 0


def test_an_up_with_unchanged_inputs_runs_no_playbook_unless_a_program_is_down(localnet):
    env, result, _ = localnet
    state = Path(env["NET_LOCALNET_DIR"])
    quick = ops("localnet", "up", "--json", env=env)
    assert quick.returncode == 0, quick.stderr
    assert json.loads(quick.stdout)["changed"] == 0
    assert json.loads(quick.stdout)["genesis_hash"] == result["genesis_hash"]
    supervisor = Supervisor(supervisor_conf(state))
    program = supervisor.processes()[0].namespec
    assert supervisor.stop(program)  # it ran
    # The inputs still match, the world does not: the playbook runs and starts it again.
    repaired = ops("localnet", "up", "--json", env=env)
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["changed"] > 0
    status = supervisor.process(program)
    assert status.statename == "RUNNING", status


def test_a_second_network_on_the_same_ports_is_refused(localnet, tmp_path):
    # Same chain spec and the same authority node keys: the first network's node would answer
    # in the second one's place, so the second up is refused while its ports are taken.
    env, result, _ = localnet
    other = {**env, "NET_LOCALNET_DIR": str(tmp_path / "other")}
    client = RpcClient(PUBLIC)
    try:
        second = ops("localnet", "up", "--json", env=other)
        assert second.returncode == 2, second.stdout
        assert "another network on the same ports" in second.stderr
        assert "9944 (rpc-0's node_rpc_port)" in second.stderr
        # Refused before anything was rendered or started for it.
        assert not (tmp_path / "other").exists()
    finally:
        down = ops("localnet", "down", "--purge", "--yes", env=other)
        assert down.returncode == 0, down.stderr
    assert client.genesis_hash() == result["genesis_hash"]
    best = client.best_number()
    deadline = time.monotonic() + 30
    while client.best_number() <= best:
        assert time.monotonic() < deadline, "the first network stopped importing blocks"
        time.sleep(0.5)


def test_down_keeps_data_and_up_resumes_the_same_chain(localnet):
    env, result, state = localnet
    client = RpcClient(PUBLIC)
    before = client.best_number()
    down = ops("localnet", "down", env=env)
    assert down.returncode == 0, down.stderr
    with pytest.raises(Exception):  # noqa: B017 - any failure to connect: the node is stopped
        client.genesis_hash()
    assert (state / "chainspec" / "raw.json").exists()
    up = ops("localnet", "up", "--json", env=env)
    assert up.returncode == 0, up.stderr
    assert client.genesis_hash() == result["genesis_hash"]
    assert client.best_number() >= before


def test_purge_refuses_a_directory_that_is_not_a_local_network(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    env = {**os.environ, "NET_LOCALNET_DIR": str(tmp_path)}
    result = ops("localnet", "down", "--purge", "--yes", env=env)
    assert result.returncode == 2
    assert "refusing to delete" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
