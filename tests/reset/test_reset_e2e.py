"""Reset cycles end to end on inventories/local with the fixture pallet-suite.

Everything is real: the local network under supervisord (deployed by the roles), the fixture
pallet-suite built by cargo, the development node paired with its runtime, pyinfra for the host
operations. State, build cache and the network live in temporary directories.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.chain.rpc import RpcClient
from ops_tools.chainspec.hashing import blake2_128_concat, storage_prefix
from ops_tools.deploy.supervisor_rpc import ProcessInfo, Supervisor
from tests.build.conftest import FIXTURE, SuiteRepo, git
from tests.conftest import ROOT
from tests.localnet import started, supervisor

pytestmark = pytest.mark.slow
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
PUBLIC = "http://127.0.0.1:9944"
DOCS = "http://127.0.0.1:8080"
INVENTORY = str(ROOT / "inventories" / "local")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("reset")
    env = {
        **os.environ,
        "NET_LOCALNET_DIR": str(base / "localnet"),
        "NET_OPS_STATE": str(base / "ops-state"),
        "OPS_TOOLS_CACHE": str(base / "build-cache"),
    }
    repo_path = base / "pallet-suite"
    shutil.copytree(FIXTURE, repo_path, ignore=shutil.ignore_patterns("target"))
    git(repo_path, "init", "-q", "-b", "main")
    suite = SuiteRepo(repo_path)
    suite.commit("commit 1")
    # A network of its own (tests/localnet.py): the cycle resets it to a new genesis. A failed
    # up may have started part of it: it is purged in any case.
    with started(base / "localnet", env=env) as net:
        yield net.env, suite, base


def run(env, *args, timeout=900):
    return subprocess.run(
        [str(OPS_TOOLS), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def cycle(env, suite, *extra, ref="main"):
    return run(
        env,
        "reset-cycle",
        "--inventory",
        INVENTORY,
        "--repo",
        str(suite.path),
        "--ref",
        ref,
        "--json",
        *extra,
    )


def journal(base: Path) -> dict:
    (path,) = (base / "ops-state" / "reset").glob("*/journal.json")
    return json.loads(path.read_text())


def manifests(env) -> dict[str, dict]:
    state = Path(env["NET_LOCALNET_DIR"])
    return {p.parent.name: json.loads(p.read_text()) for p in state.glob("*/deployed.json")}


def key_material(env) -> dict[str, str]:
    """sha256 of every keystore file and node key of every node."""
    out = {}
    for host, m in manifests(env).items():
        paths = [Path(m["node_key_path"]), *sorted(Path(m["keystore_path"]).glob("*"))]
        for p in paths:
            if p.is_file():
                out[f"{host}:{p.name}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


ALICE = Keypair.create_from_uri("//Alice")
BOB = Keypair.create_from_uri("//Bob")
ALICE_KEY = "0x" + (storage_prefix("System", "Account") + blake2_128_concat(ALICE.public_key)).hex()


def spend_from_alice():
    substrate = SubstrateInterface(url="ws://127.0.0.1:9944")
    call = substrate.compose_call(
        "Balances", "transfer_keep_alive", {"dest": BOB.ss58_address, "value": 10**15}
    )
    receipt = substrate.submit_extrinsic(
        substrate.create_signed_extrinsic(call, ALICE), wait_for_inclusion=True
    )
    assert receipt.is_success, receipt.error_message
    substrate.close()


def wait_finality(client: RpcClient, timeout=60):
    start = client.finalized_number()
    deadline = time.monotonic() + timeout
    while client.finalized_number() <= start:
        assert time.monotonic() < deadline, "finality did not advance"
        time.sleep(0.5)


def test_new_revision_resets_the_network(world):
    env, suite, base = world
    client = RpcClient(PUBLIC)
    old_genesis = client.genesis_hash()
    keys_before = key_material(env)
    spend_from_alice()
    genesis_value = json.loads(
        (Path(env["NET_LOCALNET_DIR"]) / "chainspec" / "raw.json").read_text()
    )["genesis"]["raw"]["top"][ALICE_KEY]
    assert client.call("state_getStorage", [ALICE_KEY]) != genesis_value

    result = cycle(env, suite, "--yes")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["decision"] == "reset"
    assert report["expected_genesis"] != old_genesis
    assert report["downtime_s"] is not None and report["downtime_s"] > 0
    assert client.genesis_hash() == report["expected_genesis"]
    wait_finality(client)
    for host, m in manifests(env).items():
        assert m["genesis_hash"] == report["expected_genesis"], host
        node = RpcClient(f"http://127.0.0.1:{m['rpc_port']}")
        assert node.genesis_hash() == report["expected_genesis"], host
    # balances are back at genesis; keys are the same keys
    rendered = Path(journal(base)["facts"]["render_dir"]) / "raw.json"
    alice_at_genesis = json.loads(rendered.read_text())["genesis"]["raw"]["top"][ALICE_KEY]
    assert client.call("state_getStorage", [ALICE_KEY]) == alice_at_genesis
    assert key_material(env) == keys_before

    # The docs site, published by the phase after verify: the new genesis is the current
    # release, the old one is listed below it as replaced by the new one.
    new_genesis = report["expected_genesis"]
    phases = [p["name"] for p in report["phases"]]
    assert phases.index("publish") == phases.index("verify") + 1
    with urllib.request.urlopen(DOCS + "/releases/", timeout=10) as resp:
        body = resp.read().decode()
    article = body[body.index("<article") : body.index("</article>")]  # not the page's menus
    page = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", article)))
    current, earlier = page.split("Earlier releases", 1)
    assert new_genesis in current and old_genesis not in current
    assert re.search(rf"{old_genesis}\W+Replaced on \S+ by {new_genesis}\b", earlier), earlier
    with urllib.request.urlopen(DOCS + "/releases/current/raw.json", timeout=10) as resp:
        assert resp.read() == rendered.read_bytes()


def test_same_revision_is_nothing_to_do_and_touches_no_host(world):
    env, suite, _base = world
    programs_before = supervisor_of(env).processes()
    result = cycle(env, suite)  # no --yes: nothing destructive may be needed
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["decision"] == "nothing"
    assert [p["name"] for p in report["phases"]] == ["build", "render", "compare", "decide"]
    assert report["expected_genesis"] == RpcClient(PUBLIC).genesis_hash()
    assert uptimes(supervisor_of(env).processes()) >= uptimes(programs_before)


NODES = ("authority-0", "authority-1", "rpc-0")
AUTHORITY_0 = "http://127.0.0.1:9945"


def state_dir(base: Path) -> Path:
    (path,) = (base / "ops-state" / "reset").glob("*/journal.json")
    return path.parent


def program(host: str) -> str:
    return f"net-node-{host}"


def stop_by_pid(env, host: str) -> None:
    """Ends the node's process as a crash or an operator's kill would, not through supervisor."""
    pid = supervisor_of(env).process(program(host)).pid
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text():
        assert time.monotonic() < deadline, f"{host} (pid {pid}) did not stop"
        time.sleep(0.1)
    status = supervisor_of(env).process(program(host))
    assert status.statename != "RUNNING", f"supervisor brought {host} back by itself: {status}"


def chain_state(url: str) -> tuple[int, str]:
    client = RpcClient(url)
    return client.best_number(), client.call("state_getStorage", [ALICE_KEY])


def assert_repaired_with_the_same_chain(env, suite, base, down, before):
    """The dry run, then the real run, decide repair; the real one brings the chain back as it
    was: same genesis, heights continue, balances kept, no chain data purged."""
    genesis, best, alice = before
    dry = cycle(env, suite, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["decision"] == "repair" and plan["dry_run"]
    assert plan["plan"] == ["repair-nodes", "repair-edge", "verify"]
    assert set(plan["down"]) == {*down, "public endpoint"}
    evidence = plan["evidence"]
    assert len(evidence["public_probes"]) == 3
    assert all("no answer" in p for p in evidence["public_probes"])
    for host in NODES:
        assert evidence["nodes"][host]["deployed"] == genesis
        assert evidence["nodes"][host]["serves"] == (None if host in down else genesis)
    for host in down:  # a dry run touches nothing
        assert supervisor_of(env).process(program(host)).statename != "RUNNING"

    result = cycle(env, suite, "--yes")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["decision"] == "repair" and report["reason"] == plan["reason"]
    assert [p["name"] for p in report["phases"]] == [
        "build", "render", "compare", "decide", "repair-nodes", "repair-edge", "verify"]
    repaired = report["phases"][4]["detail"]
    assert all(f"{host}: was down, started" in repaired for host in down), repaired
    assert RpcClient(PUBLIC).genesis_hash() == genesis
    best_after, alice_after = chain_state(PUBLIC)
    assert best_after > best  # the same chain, continued: not a new one from block 0
    assert alice_after == alice
    for host, m in manifests(env).items():
        assert m["genesis_hash"] == genesis, host
    outcome = json.loads((state_dir(base) / "last-run.json").read_text())
    assert outcome["status"] == "completed" and outcome["decision"] == "repair"
    assert set(outcome["down"]) == set(plan["down"])


def test_stopped_rpc_node_is_repaired_not_reset(world):
    env, suite, base = world
    spend_from_alice()  # the chain's state differs from genesis: a reset would show
    genesis = RpcClient(PUBLIC).genesis_hash()
    best, alice = chain_state(AUTHORITY_0)
    stop_by_pid(env, "rpc-0")
    assert_repaired_with_the_same_chain(env, suite, base, ["rpc-0"], (genesis, best, alice))
    shown = run({**env, "COLUMNS": "1000"}, "status", "--inventory", INVENTORY)
    assert re.search(r"last reset cycle \w+ \(.*\): completed, decision repair \(down: rpc-0,"
                     r" public endpoint\)", shown.stdout), shown.stdout


def test_every_node_stopped_is_repaired_not_reset(world):
    env, suite, base = world
    genesis = RpcClient(PUBLIC).genesis_hash()
    best, alice = chain_state(PUBLIC)
    for host in NODES:
        supervisor_of(env).stop(program(host))
    assert_repaired_with_the_same_chain(env, suite, base, list(NODES), (genesis, best, alice))


def test_force_reset_says_what_it_deletes_and_refuses_without_yes(world):
    env, suite, base = world
    genesis = RpcClient(PUBLIC).genesis_hash()
    dry = cycle(env, suite, "--force-reset", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["decision"] == "reset"
    assert "--force-reset" in json.loads(dry.stdout)["reason"]
    # Wide enough that Rich does not wrap the paths it lists.
    refused = run({**env, "COLUMNS": "1000"}, "reset-cycle", "--inventory", INVENTORY,
                  "--repo", str(suite.path), "--ref", "main", "--force-reset")
    assert refused.returncode != 0 and "--yes" in refused.stderr
    for host, m in manifests(env).items():
        assert f"{host}: the chain database under {m['base_path']}" in refused.stdout
    assert journal(base)["status"] == "declined"  # nothing a later --resume could run
    resume = cycle(env, suite, "--resume", "--yes")
    assert resume.returncode != 0 and "nothing to resume" in resume.stderr
    assert RpcClient(PUBLIC).genesis_hash() == genesis
    wait_finality(RpcClient(PUBLIC))


def supervisor_of(env: dict[str, str]) -> Supervisor:
    return supervisor(Path(env["NET_LOCALNET_DIR"]))


def uptimes(programs: list[ProcessInfo]) -> int:
    """Sum of the programs' uptimes in seconds: it only grows when no program restarted."""
    total = 0
    for p in programs:
        if "uptime" in p.description:
            h, m, s = p.description.rsplit("uptime", 1)[1].strip().split(":")
            total += int(h) * 3600 + int(m) * 60 + int(s)
    return total


def test_dry_run_prints_the_plan_and_touches_nothing(world):
    env, suite, _base = world
    suite.commit("commit 2: spec 7", suite.set_spec_version(7))
    before = manifests(env)
    result = cycle(env, suite, "--dry-run")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dry_run"] and report["decision"] == "reset"
    assert "stop-nodes" in report["plan"] and "differs" in report["reason"]
    assert manifests(env) == before


def test_without_yes_and_without_a_terminal_it_refuses(world):
    env, suite, _ = world
    genesis = RpcClient(PUBLIC).genesis_hash()
    result = cycle(env, suite)
    assert result.returncode != 0
    assert "--yes" in result.stderr
    assert RpcClient(PUBLIC).genesis_hash() == genesis


def test_identity_mismatch_is_refused_before_anything_destructive(world):
    env, suite, base = world
    state = Path(env["NET_LOCALNET_DIR"])
    originals = {p: p.read_text() for p in state.glob("*/deployed.json")}
    try:
        for p, text in originals.items():
            m = json.loads(text)
            m["genesis_hash"] = "0x" + "ee" * 32
            p.write_text(json.dumps(m))
        result = cycle(env, suite, "--yes")
        assert result.returncode != 0
        assert "refusing to touch it" in result.stderr
        phases = journal(base)["steps"]
        assert phases[-1]["name"] == "preflight" and phases[-1]["status"] == "failed"
        assert not any(p["name"].startswith("stop") for p in phases)
    finally:
        for p, text in originals.items():
            p.write_text(text)
    wait_finality(RpcClient(PUBLIC))  # the network was not touched


def test_authority_not_back_in_time_stops_the_cycle_then_resume_completes(world, tmp_path):
    env, suite, base = world
    nodes = manifests(env)
    rpc_db = next(Path(m["base_path"]) for m in nodes.values() if m["role"] == "rpc")
    # authority-1 comes back without its grandpa key: it authors but never votes, so finality
    # cannot advance (it needs both authorities) and the cycle must stop at wait-finality.
    (gran_key,) = Path(nodes["authority-1"]["keystore_path"]).glob("6772616e*")
    aside = tmp_path / gran_key.name
    shutil.move(gran_key, aside)
    try:
        result = cycle(env, suite, "--yes", "--timeout", "15")
        assert result.returncode != 0
        assert "did not author blocks and finalize" in result.stderr
        assert "--resume" in result.stderr
        j = journal(base)
        assert j["status"] == "failed" and j["error"].startswith("wait-finality")
        assert not any(p["name"] == "reset-rpc" for p in j["steps"])  # nothing else wiped
        assert any(rpc_db.rglob("*")), "the RPC node's data must still be there"
    finally:
        shutil.move(aside, gran_key)  # the operator's fix: the key is back
    # The journal says authority-0 was started; the world no longer agrees.
    supervisor_of(env).stop(program("authority-0"))
    resumed = cycle(env, suite, "--resume", "--yes", ref="ignored-on-resume")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["expected_genesis"] == RpcClient(PUBLIC).genesis_hash()
    assert [p["name"] for p in report["phases"]].count("wait-finality") == 2
    again = {p["name"]: p for p in report["phases"][len(j["steps"]):]}
    assert again["start-authorities"]["status"] == "done"
    assert again["start-authorities"]["detail"].startswith(
        "done again (authority-0 serves nothing, not"), again["start-authorities"]
    assert again["reset-authorities"]["status"] == "checked"  # still pushed: not purged again
    assert again["decide"]["status"] == "checked"
    wait_finality(RpcClient(PUBLIC))


def test_killed_in_the_start_phase_then_resume_completes_and_a_second_cycle_is_refused(world):
    env, suite, base = world
    suite.commit("commit 3: spec 8", suite.set_spec_version(8))
    previous = journal(base)["cycle_id"]  # the journal still describes the last cycle
    proc = subprocess.Popen(
        [
            str(OPS_TOOLS),
            "reset-cycle",
            "--inventory",
            INVENTORY,
            "--repo",
            str(suite.path),
            "--ref",
            "main",
            "--yes",
            "--json",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        refused = False
        while True:
            assert time.monotonic() < deadline, "the cycle never reached start-authorities"
            assert proc.poll() is None, "the cycle ended before it could be interrupted"
            try:
                current = journal(base)
            except (FileNotFoundError, ValueError):
                current = {}
            # Until the new cycle holds the lock and has written its journal, the file still
            # shows the previous cycle's phases: ignore it.
            phases = current.get("steps", []) if current.get("cycle_id") != previous else []
            if not refused and any(p["name"] == "stop-nodes" for p in phases):
                second = cycle(env, suite, "--yes")
                assert second.returncode != 0 and "another reset cycle is running" in second.stderr
                refused = True
            if any(p["name"] == "start-authorities" for p in phases):
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        assert refused
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = journal(base)
    assert killed["status"] == "running"
    # The journal says authority-1's spec was pushed; the world no longer agrees.
    spec = Path(manifests(env)["authority-1"]["chainspec_path"])
    spec.write_text("{}")
    # As the scheduler runs it: the interrupted cycle is finished first, then a new one runs
    # (and finds nothing to do on the revision just reset onto).
    resumed = cycle(env, suite, "--resume-interrupted", "--yes")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resumed"]["cycle_id"] == killed["cycle_id"]
    assert report["resumed"]["decision"] == "reset"
    redone = {p["name"]: p for p in report["resumed"]["phases"][len(killed["steps"]):]}
    assert redone["reset-authorities"]["detail"].startswith(
        f"done again (authority-1: spec {spec} is not the pushed one"), redone
    assert redone["stop-nodes"]["status"] == "checked"
    assert report["decision"] == "nothing" and report["cycle_id"] != killed["cycle_id"]
    assert RpcClient(PUBLIC).genesis_hash() == report["expected_genesis"]
    wait_finality(RpcClient(PUBLIC))
