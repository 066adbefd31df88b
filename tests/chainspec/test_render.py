"""Rendering network definitions with the development node as the node binary."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from ops_tools.chainspec.render import render
from ops_tools.chainspec.runtime import RuntimeVersion, api, build_runtime_blob
from ops_tools.errors import InputError, OpsError
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

LOCAL = ROOT / "chainspec" / "networks" / "local.yml"
DEVNODE = Path(sys.executable).with_name("devnode")


@pytest.fixture(scope="module")
def node() -> Path:
    if not DEVNODE.exists():
        pytest.fail(f"the development node is not installed at {DEVNODE}; run scripts/bootstrap")
    return DEVNODE


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops_tools.cli.main", "chainspec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        check=False,
    )


def edited_network(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(LOCAL.read_text())
    edit(data)
    path = tmp_path / "net.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_render_twice_gives_identical_bytes_and_consistent_hashes(node, tmp_path):
    a, b = render(LOCAL, node), render(LOCAL, node)
    assert a.raw == b.raw and a.plain == b.plain and a.manifest == b.manifest
    a.write(tmp_path)
    result = cli("genesis-hash", str(tmp_path / "raw.json"))
    assert result.stdout.strip() == a.manifest["genesis_hash"]
    raw = json.loads(a.raw)
    assert raw["bootNodes"] == [
        "/ip4/127.0.0.1/tcp/30333/p2p/12D3KooWJEvVCijtP7ka2Q5BmJ9qSrBuzpo26saeauhwnjXkMgso",
        "/ip4/127.0.0.1/tcp/30334/p2p/12D3KooWG1UsovPuGJvjFcrtKxR3i1Kpa6JTcp99J681W1WjGhiY",
    ]
    assert a.raw.endswith(b"}\n") and b"\r" not in a.raw


def test_development_node_serves_the_rendered_genesis(node, tmp_path):
    rendered = render(LOCAL, node)
    rendered.write(tmp_path)
    rpc, p2p = free_port(), free_port()
    proc = subprocess.Popen(
        [
            str(node),
            "--chain",
            str(tmp_path / "raw.json"),
            "--base-path",
            str(tmp_path / "base"),
            "--name",
            "render-test",
            "--rpc-port",
            str(rpc),
            "--port",
            str(p2p),
            "--no-prometheus",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{rpc}",
                    data=json.dumps(
                        {"jsonrpc": "2.0", "id": 1, "method": "chain_getBlockHash", "params": [0]}
                    ).encode(),
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=2) as resp:
                    served = json.load(resp)["result"]
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        assert served == rendered.manifest["genesis_hash"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_verify_determinism_across_environments(node):
    result = cli("verify-determinism", "--network", str(LOCAL), "--node", str(node), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["identical"] is True
    assert data["genesis_hash"].startswith("0x")


def test_verify_determinism_names_the_first_difference(tmp_path):
    # A node that stamps the time into a storage value: the classic non-determinism.
    fake = tmp_path / "stamping-node"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, subprocess, sys, time\n"
        f"node = {str(DEVNODE)!r}\n"
        "out = subprocess.run([node, *sys.argv[1:]], capture_output=True, check=True).stdout\n"
        "if 'build-spec' in sys.argv and 'dev' not in sys.argv:\n"
        "    spec = json.loads(out)\n"
        "    spec['genesis']['raw']['top']['0x' + 'ab' * 4] = '0x%016x' % time.time_ns()\n"
        "    out = json.dumps(spec).encode()\n"
        "sys.stdout.buffer.write(out)\n"
    )
    fake.chmod(0o755)
    result = cli("verify-determinism", "--network", str(LOCAL), "--node", str(fake))
    assert result.returncode == 1
    assert "genesis.raw.top.0xabababab" in result.stderr


def test_another_runtime_changes_the_genesis(node, tmp_path):
    base = render(LOCAL, node)
    other = RuntimeVersion("net-dev", "net-dev-node", 1, 7, 1, 1, 1, [api("Core", 5)])
    blob = tmp_path / "runtime.wasm"
    blob.write_bytes(build_runtime_blob(other))
    changed = render(LOCAL, node, blob, pallet_suite_revision="f" * 40)
    assert changed.manifest["genesis_hash"] != base.manifest["genesis_hash"]
    assert changed.manifest["runtime"]["spec_version"] == 7
    assert changed.manifest["pallet_suite_revision"] == "f" * 40


def test_reordered_definition_gives_the_same_genesis(node, tmp_path):
    def reorder(data):
        data["accounts"].reverse()
        for key in list(data):  # move every top-level key to the end: mapping order changes
            data[key] = data.pop(key)

    path = edited_network(tmp_path, reorder)
    assert path.read_bytes() != LOCAL.read_bytes()
    assert render(path, node).raw == render(LOCAL, node).raw


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (
            lambda d: d["authorities"][0].update(
                aura="5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQX"
            ),
            ["authorities[0].aura", "not a valid ss58 address"],
        ),
        (
            lambda d: d["authorities"][1].update(grandpa=d["authorities"][0]["grandpa"]),
            ["authorities[1].grandpa", "duplicate grandpa key"],
        ),
        (
            lambda d: d["accounts"][0].update(
                address="HNZata7iMYWmk5RvZRTiAsSDhV8366zq2YGb3tLH5Upf74F"
            ),
            ["accounts[0].address", "another network", "prefix 42"],
        ),
        (
            lambda d: d["accounts"][0].update(balance=5),
            ["accounts[0].balance", "existential deposit"],
        ),
        (lambda d: d.pop("sudo"), ["'sudo' is a required property"]),
        (
            lambda d: d["consensus"].update(slot_duration_ms="fast"),
            ["consensus.slot_duration_ms", "'fast'", "type"],
        ),
        (
            lambda d: d["authorities"][0].update(peer_id="12D3KooWnotapeerid"),
            ["authorities[0].peer_id"],
        ),
    ],
)
def test_bad_definitions_are_refused_with_named_errors(node, tmp_path, edit, needles):
    path = edited_network(tmp_path, edit)
    with pytest.raises(InputError) as err:
        render(path, node)
    for needle in needles:
        assert needle in str(err.value)
    out = tmp_path / "out"
    result = cli("render", "--network", str(path), "--node", str(node), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and needles[0] in result.stderr
    assert not out.exists()


def test_missing_or_failing_node_binary(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        render(LOCAL, tmp_path / "no-node")
    failing = tmp_path / "failing-node"
    failing.write_text("#!/bin/sh\necho 'Error: Input(\"boom\")' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(OpsError, match="failed with exit status 1: Error"):
        render(LOCAL, failing)
    out = tmp_path / "out"
    result = cli("render", "--network", str(LOCAL), "--node", str(failing), "--out", str(out))
    assert result.returncode == 1 and "boom" in result.stderr
    assert not out.exists()


def test_committed_lock_matches_the_default_render(node):
    result = cli("render", "--network", str(LOCAL), "--node", str(node), "--check")
    assert result.returncode == 0, result.stderr
    assert "matches" in result.stdout


def test_check_fails_against_a_stale_lock(node, tmp_path):
    lock = tmp_path / "local.lock.json"
    data = json.loads((ROOT / "chainspec" / "local.lock.json").read_text())
    data["genesis_hash"] = "0x" + "00" * 32
    lock.write_text(json.dumps(data))
    result = cli(
        "render", "--network", str(LOCAL), "--node", str(node), "--check", "--lock", str(lock)
    )
    assert result.returncode == 1
    assert "genesis_hash: locked 0x0000" in result.stderr


def test_diff_names_storage_items_and_runtime_changes(node, tmp_path):
    render(LOCAL, node).write(tmp_path / "a")
    blob = tmp_path / "runtime.wasm"
    blob.write_bytes(
        build_runtime_blob(RuntimeVersion("net-dev", "x", 1, 9, 1, 1, 1, [api("Core", 5)]))
    )
    richer = edited_network(
        tmp_path, lambda d: d["accounts"][0].update(balance=d["accounts"][0]["balance"] + 1)
    )
    render(richer, node, blob).write(tmp_path / "b")
    result = cli(
        "diff", str(tmp_path / "a" / "raw.json"), str(tmp_path / "b" / "raw.json"), "--json"
    )
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["identical"] is False
    assert d["runtime"]["spec_version"] == {"a": 6, "b": 9}
    assert len(d["storage"]["System.Account"]["changed"]) == 1
    assert d["storage"]["Balances.TotalIssuance"]["changed"]
    same = cli("diff", str(tmp_path / "a" / "raw.json"), str(tmp_path / "a" / "raw.json"))
    assert "identical genesis" in same.stdout


def test_render_from_another_directory_with_relative_paths(node, tmp_path):
    shutil.copy(LOCAL, tmp_path / "local.yml")
    result = cli(
        "render", "--network", "local.yml", "--node", str(node), "--out", "out", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "raw.json").exists()
