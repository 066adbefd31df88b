"""The devnode command line: build-spec, key management, version and bad input."""

from __future__ import annotations

import json
import socket
import stat
import subprocess

import pytest

from tests.devnode.conftest import OPS_TOOLS, Node, make_plain_spec, run
from tests.support.devnode import free_port

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_version():
    out = run("--version", check=True).stdout.strip()
    assert out.startswith("devnode 0.1.0-") and out.endswith("(spec net-dev 6)")


def test_build_spec_raw_is_deterministic_and_matches_ops_tools(plain_spec_path, tmp_path):
    args = ("build-spec", "--chain", str(plain_spec_path), "--raw", "--disable-default-bootnode")
    first, second = run(*args, check=True).stdout, run(*args, check=True).stdout
    assert first == second
    raw = json.loads(first)
    assert list(raw)[:8] == [
        "name",
        "id",
        "chainType",
        "bootNodes",
        "telemetryEndpoints",
        "protocolId",
        "properties",
        "codeSubstitutes",
    ]
    assert raw["bootNodes"] == [] and raw["genesis"]["raw"]["childrenDefault"] == {}
    assert "0x3a636f6465" in raw["genesis"]["raw"]["top"]
    path = tmp_path / "raw.json"
    path.write_text(first)
    offline = subprocess.run(
        [OPS_TOOLS, "chainspec", "genesis-hash", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert offline.startswith("0x") and len(offline) == 66


def test_default_bootnode_is_a_fresh_identity_each_run(plain_spec_path):
    one = json.loads(
        run("build-spec", "--chain", str(plain_spec_path), "--raw", check=True).stdout
    )["bootNodes"]
    two = json.loads(
        run("build-spec", "--chain", str(plain_spec_path), "--raw", check=True).stdout
    )["bootNodes"]
    assert len(one) == 1 and one[0].startswith("/ip4/127.0.0.1/tcp/30333/p2p/12D3KooW")
    assert one != two


def test_config_values_change_the_genesis(tmp_path):
    def genesis(**kw) -> str:
        spec = make_plain_spec(tmp_path / "p.json", **kw)
        raw = tmp_path / "r.json"
        raw.write_text(
            run(
                "build-spec",
                "--chain",
                str(spec),
                "--raw",
                "--disable-default-bootnode",
                check=True,
            ).stdout
        )
        return subprocess.run(
            [OPS_TOOLS, "chainspec", "genesis-hash", str(raw)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    base = genesis()
    assert genesis(epoch_length=11) != base
    assert genesis(slot_ms=600) != base
    assert genesis(extra={"operatorStake": {"minStake": 5}}) != base


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda p: p["balances"]["balances"].__setitem__(
                2, [p["balances"]["balances"][2][0], "lots"]
            ),
            "patch.balances.balances[2][1]",
        ),
        (lambda p: p.__setitem__("staking", {}), "patch.staking: unknown field"),
        (
            lambda p: p["aura"].__setitem__("authorities", ["not-an-address"]),
            "patch.aura.authorities[0]",
        ),
        (
            lambda p: p["operatorStake"].__setitem__("epochLength", 0),
            "patch.operatorStake.epochLength",
        ),
        (lambda p: p["sudo"].__setitem__("keys", "x"), "patch.sudo.keys: unknown field"),
    ],
)
def test_bad_patch_names_the_path(tmp_path, plain_spec_path, mutate, expected):
    data = json.loads(plain_spec_path.read_text())
    mutate(data["genesis"]["runtimeGenesis"]["patch"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    proc = run("build-spec", "--chain", str(bad), "--raw", "--disable-default-bootnode")
    assert proc.returncode == 2 and proc.stdout == ""
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_chain_arguments(tmp_path):
    missing = run("--chain", str(tmp_path / "nope.json"), "--base-path", str(tmp_path))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    proc = run("--chain", str(broken), "--base-path", str(tmp_path))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    directory = run("build-spec", "--chain", str(tmp_path))
    assert directory.returncode == 2 and "is a directory" in directory.stderr
    for p in (missing, broken, directory):
        assert "Traceback" not in getattr(p, "stderr", "")


def test_busy_port_and_missing_aura_key(tmp_path, raw_spec):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        n = Node(tmp_path / "b1", str(raw_spec), "--no-prometheus", validator_key=None)
        n.args[n.args.index("--rpc-port") + 1] = str(busy)
        proc = subprocess.run(n.args, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and f"RPC port 127.0.0.1:{busy} is already in use" in proc.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        n = Node(tmp_path / "b3", str(raw_spec), "--no-prometheus", validator_key=None)
        n.args[n.args.index("--port") + 1] = str(busy)
        proc = subprocess.run(n.args, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and f"p2p port 127.0.0.1:{busy} is already in use" in proc.stderr
    assert "Traceback" not in proc.stderr
    key = tmp_path / "nk"
    run("key", "generate-node-key", "--file", str(key), check=True)
    proc = run(
        "--chain",
        str(raw_spec),
        "--base-path",
        str(tmp_path / "b2"),
        "--validator",
        "--node-key-file",
        str(key),
        "--rpc-port",
        str(free_port()),
        "--no-prometheus",
    )
    assert proc.returncode != 0 and "holds no aura key" in proc.stderr


def test_validator_without_node_key_refuses_to_start(tmp_path, raw_spec):
    proc = run(
        "--chain",
        str(raw_spec),
        "--base-path",
        str(tmp_path),
        "--alice",
        "--rpc-port",
        str(free_port()),
        "--no-prometheus",
    )
    assert proc.returncode != 0 and "NetworkKeyNotFound" in proc.stderr


def test_key_insert_reads_the_secret_from_stdin(tmp_path, raw_spec):
    base = tmp_path / "base"
    proc = run(
        "key",
        "insert",
        "--base-path",
        str(base),
        "--chain",
        str(raw_spec),
        "--scheme",
        "Ed25519",
        "--key-type",
        "gran",
        input="//Bob\n",
    )
    assert proc.returncode == 0, proc.stderr
    files = list((base / "chains" / "test_net" / "keystore").iterdir())
    bob_ed = "d17c2d7823ebf260fd138f2d7e27d114c0145d968b5ff5006125f2414fadae69"
    assert [f.name for f in files] == ["6772616e" + bob_ed]
    assert json.loads(files[0].read_text()) == "//Bob"
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    bad = run(
        "key",
        "insert",
        "--base-path",
        str(base),
        "--chain",
        str(raw_spec),
        "--scheme",
        "Sr25519",
        "--key-type",
        "toolong",
        input="//Bob\n",
    )
    assert bad.returncode == 2 and "key type" in bad.stderr
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    blocked = run(
        "key",
        "insert",
        "--base-path",
        str(not_a_dir),
        "--chain",
        str(raw_spec),
        "--scheme",
        "Sr25519",
        "--key-type",
        "aura",
        input="//Bob\n",
    )
    assert (
        blocked.returncode == 1
        and "Not a directory" in blocked.stderr
        and "Traceback" not in blocked.stderr
    )
    assert "//Bob" not in blocked.stderr + bad.stderr + proc.stderr  # secrets never echoed


def test_node_key_generate_and_inspect(tmp_path):
    hex_file, bin_file = tmp_path / "hex.key", tmp_path / "bin.key"
    gen = run("key", "generate-node-key", "--file", str(hex_file), check=True)
    run("key", "generate-node-key", "--file", str(bin_file), "--bin", check=True)
    assert len(bytes.fromhex(hex_file.read_text())) == 32 and len(bin_file.read_bytes()) == 32
    assert stat.S_IMODE(hex_file.stat().st_mode) == 0o600
    peer = run("key", "inspect-node-key", "--file", str(hex_file), check=True).stdout.strip()
    assert peer.startswith("12D3KooW") and peer == gen.stderr.strip()
    assert run("key", "inspect-node-key", "--file", str(bin_file), check=True).stdout.startswith(
        "12D3KooW"
    )
    # The node key of Substrate's private-network tutorial and its published peer id.
    known = tmp_path / "known.key"
    known.write_text("00" * 31 + "01")
    assert (
        run("key", "inspect-node-key", "--file", str(known), check=True).stdout.strip()
        == "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"
    )


def test_dev_flag_runs_a_single_authority_chain(tmp_path):
    node = Node(tmp_path / "unused", "dev", "--dev", validator_key=None)
    node.args.remove("--base-path")
    node.args.remove(str(tmp_path / "unused"))
    node.start()
    try:
        node.wait_for(lambda: node.finalized() >= 1, timeout=30, what="a finalized block on --dev")
        assert node.call("system_chain") == "Development"
        assert node.call("system_nodeRoles") == ["Authority"]
        assert node.call("system_health")["shouldHavePeers"] is False
    finally:
        node.stop()
    assert not (tmp_path / "unused").exists()  # --tmp: nothing under a base path
