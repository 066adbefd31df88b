"""``ops-tools chainspec`` as a user runs it: output shapes, and one clear line for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from ops_tools.chainspec import compute_genesis, load_spec
from ops_tools.chainspec.runtime import ZSTD_PREFIX, RuntimeVersion, api, build_runtime_blob

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

RUNTIME = RuntimeVersion(
    "net-dev", "net-dev-node", 1, 6, 1, 1, 1, [api("Core", 5), api("AuraApi", 1)]
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops_tools.cli.main", "chainspec", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_spec(tmp_path: Path, top: dict[str, str] | None = None, **extra) -> Path:
    code = "0x" + build_runtime_blob(RUNTIME).hex()
    spec = {
        "name": "NET Test",
        "id": "net_test",
        "protocolId": "nettest",
        "chainType": "Local",
        "bootNodes": ["/ip4/127.0.0.1/tcp/30333/p2p/12D3KooWExample"],
        "properties": {"tokenSymbol": "NET", "tokenDecimals": 12, "ss58Format": 42},
        "genesis": {
            "raw": {
                "top": top
                if top is not None
                else {"0x3a636f6465": code, "0x0102": "0x" + "ab" * 40},
                "childrenDefault": {},
            }
        },
        **extra,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_genesis_hash_prints_only_the_hash(tmp_path):
    spec = write_spec(tmp_path)
    result = run("genesis-hash", str(spec))
    assert result.returncode == 0, result.stderr
    expected = "0x" + compute_genesis(load_spec(spec)).genesis_hash.hex()
    assert result.stdout == expected + "\n"


def test_genesis_hash_json(tmp_path):
    spec = write_spec(tmp_path)
    data = json.loads(run("genesis-hash", str(spec), "--json").stdout)
    assert data["state_version"] == 1
    assert data["spec_name"] == "net-dev"
    assert data["spec_version"] == 6
    assert data["spec_sha256"] == __import__("hashlib").sha256(spec.read_bytes()).hexdigest()
    assert data["code_blake2_256"].startswith("0x") and len(data["code_blake2_256"]) == 66
    for key in ("genesis_hash", "state_root"):
        assert data[key].startswith("0x") and len(data[key]) == 66


def test_state_version_override_changes_the_hash(tmp_path):
    spec = write_spec(tmp_path)
    v1 = run("genesis-hash", str(spec)).stdout
    v0 = run("genesis-hash", str(spec), "--state-version", "0").stdout
    assert v0 != v1
    assert run("genesis-hash", str(spec), "--state-version", "1").stdout == v1
    assert run("genesis-hash", str(spec), "--state-version", "2").returncode == 2


def test_inspect_summarises(tmp_path):
    spec = write_spec(tmp_path)
    text = run("inspect", str(spec))
    assert text.returncode == 0, text.stderr
    for needle in (
        "NET Test",
        "net_test",
        "nettest",
        "Local",
        "tokenSymbol=NET",
        "12D3KooWExample",
        "AuraApi",
    ):
        assert needle in text.stdout
    data = json.loads(run("inspect", str(spec), "--json").stdout)
    assert data["storage_keys"] == 2
    assert data["runtime"]["spec_version"] == 6
    assert data["bootNodes"] == ["/ip4/127.0.0.1/tcp/30333/p2p/12D3KooWExample"]


def test_inspect_a_light_spec(vectors_dir):
    data = json.loads(run("inspect", str(vectors_dir / "polkadot.light.json"), "--json").stdout)
    assert data["spec_kind"] == "light"
    assert (
        data["genesis_hash"] == "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3"
    )


def test_missing_file(tmp_path):
    assert_one_line_error(
        run("genesis-hash", str(tmp_path / "nope.json")), "no such file", "nope.json"
    )


def test_invalid_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"genesis": ')
    assert_one_line_error(run("genesis-hash", str(path)), "not valid JSON")


def test_no_genesis(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"name": "x"}')
    assert_one_line_error(run("genesis-hash", str(path)), "'genesis'")


def test_plain_spec_says_to_convert_it(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"genesis": {"runtimeGenesis": {"code": "0x00", "patch": {}}}}')
    assert_one_line_error(run("genesis-hash", str(path)), "not raw", "build-spec")


@pytest.mark.parametrize(
    ("top", "needle"),
    [
        ({"0xzz": "0x00"}, "not hex"),
        ({"0x123": "0x00"}, "odd number of hex digits"),
        ({"0x12": "0xqq"}, "not hex"),
        ({"0x12": "0x123"}, "odd number of hex digits"),
        ({"0x12": 7}, "expected a hex string"),
        ({"0x12": "0x00"}, "no ':code'"),
        ({"0x3a636f6465": "0x7f454c46"}, "not a wasm module"),
        ({"0xAB": "0x00", "0xab": "0x01"}, "appears twice"),
    ],
)
def test_bad_storage(tmp_path, top, needle):
    assert_one_line_error(run("genesis-hash", str(write_spec(tmp_path, top))), needle)


def test_compression_bomb(tmp_path):
    bomb = ZSTD_PREFIX + zstandard.ZstdCompressor().compress(b"\x00" * (60 * 1024 * 1024))
    spec = write_spec(tmp_path, {"0x3a636f6465": "0x" + bomb.hex()})
    assert_one_line_error(run("genesis-hash", str(spec)), "inflates past the bound")
