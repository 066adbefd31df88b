"""`ops-tools node devnode-bundle`: one executable file, the same bytes from the same sources,
that runs on a Debian 12 systemd host with nothing but its python3: as a service user without a
home of its own, under the sandboxing the node's unit uses."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from ops_tools.build.devnode_bundle import distribution_closure, imported_top_level

OPS_TOOLS = Path(sys.executable).parent / "ops-tools"
DEVNODE = Path(sys.executable).parent / "devnode"


def test_imports_found_in_sources_leave_out_stdlib_and_the_suite() -> None:
    src = textwrap.dedent("""
        import os, json
        import numpy.linalg
        from yaml import safe_load
        from ops_tools.errors import InputError
        from . import sibling
        def f():
            import orjson
    """).encode()
    assert imported_top_level({"m.py": src, "data.json": b"{"}) == {"numpy", "yaml", "orjson"}


def test_closure_pins_what_is_installed_with_its_requirements() -> None:
    closure = distribution_closure({"jsonschema"})
    assert "jsonschema" in closure and "referencing" in closure and "attrs" in closure
    from importlib.metadata import version

    assert closure["jsonschema"] == version("jsonschema")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("bundle") / "net-node"
    proc = subprocess.run([str(OPS_TOOLS), "node", "devnode-bundle", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    reported = json.loads(proc.stdout)
    assert reported["path"] == str(out)
    assert reported["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    return out, reported["sha256"]


def test_two_builds_give_the_same_bytes(bundle: tuple[Path, str], tmp_path: Path) -> None:
    first, sha = bundle
    again = tmp_path / "again"
    proc = subprocess.run([str(OPS_TOOLS), "node", "devnode-bundle", "--out", str(again),
                           "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sha256"] == sha
    assert again.read_bytes() == first.read_bytes()
    with zipfile.ZipFile(first) as zf:
        names = zf.namelist()
    assert names == sorted(names)
    assert not [n for n in names if n.endswith(".pyc")]


def test_bundle_runs_on_a_systemd_host_as_a_sandboxed_service(
    bundle: tuple[Path, str], testhosts, tmp_path: Path,
) -> None:
    host = testhosts("alpha", "beta").hosts[0]
    path, _ = bundle
    host.put(path, "/usr/local/bin/net-node-bundle")
    # The same genesis as the controller's development node (build-spec adds a fresh bootnode
    # each time, as Substrate does, so the files themselves differ).
    remote = host.ssh("net-node-bundle build-spec --chain dev --raw", timeout=120)
    assert remote.returncode == 0, remote.stderr
    (tmp_path / "remote.json").write_text(remote.stdout)
    (tmp_path / "local.json").write_bytes(subprocess.run(
        [str(DEVNODE), "build-spec", "--chain", "dev", "--raw"],
        capture_output=True, timeout=120, check=True).stdout)
    hashes = [json.loads(subprocess.run(
        [str(OPS_TOOLS), "chainspec", "genesis-hash", str(tmp_path / f"{side}.json"), "--json"],
        capture_output=True, text=True, timeout=120, check=True).stdout)["genesis_hash"]
        for side in ("remote", "local")]
    assert hashes[0] == hashes[1]
    expected = hashes[0]
    # A service with no writable home, a private /tmp and the unit's sandbox: it unpacks into
    # its private /tmp and serves RPC.
    unit = ("sudo systemd-run --unit=bundle-probe --property=DynamicUser=yes"
            " --property=ProtectHome=yes --property=PrivateTmp=yes --property=ProtectSystem=strict"
            " --property=NoNewPrivileges=yes /usr/local/bin/net-node-bundle --dev"
            " --rpc-port 9944")
    proc = host.ssh(unit)
    assert proc.returncode == 0, proc.stderr
    try:
        probe = textwrap.dedent("""
            import json, time, urllib.request
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_getBlockHash",
                               "params": [0]}).encode()
            for _ in range(300):
                try:
                    req = urllib.request.Request("http://127.0.0.1:9944", body,
                                                 {"Content-Type": "application/json"})
                    print(json.load(urllib.request.urlopen(req, timeout=2))["result"]); break
                except OSError:
                    time.sleep(0.2)
        """)
        answer = host.ssh(f"python3 -c '{probe}'", timeout=120)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == expected
        status = host.ssh("systemctl is-active bundle-probe;"
                          " ps -o uid= -p $(systemctl show -p MainPID --value bundle-probe)")
        state, uid = status.stdout.split()
        assert state == "active" and int(uid) != 0, status.stdout
    finally:
        host.ssh("sudo systemctl stop bundle-probe; sudo systemctl reset-failed bundle-probe")
