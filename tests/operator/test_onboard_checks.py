"""Every journal-skip path of ``ops-tools operator onboard``: the thing the journal claims is
removed from the world, the step's check names what is gone, and the step is done again
(``runner.settle``, one step at a time, as the run calls it).

Against every service on free loopback ports (``onboard_stacks.ports_stack``, a stack of this
module's own: its faucet allows three drips per address a day, which the other onboarding
tests' stack spends).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ops_tools.deploy.supervisor_rpc import Supervisor
from ops_tools.errors import InputError, OpsError
from ops_tools.operator import gateway_client, runner
from ops_tools.operator.context import TEST_ENGINE, Context, Options
from ops_tools.operator.journal import Journal
from ops_tools.operator.steps import attestation, daemon, funding, gpu, heartbeat, stake, wallet
from ops_tools.wallet import mnemonic_keys, operator, rpc
from ops_tools.wallet.keystore import Keystore
from tests.conftest import free_port
from tests.operator.conftest import ONBOARD_PASSPHRASE
from tests.operator.onboard_stacks import ports_stack
from tests.services.gateway.harness import secret_file, wait_for

pytestmark = pytest.mark.slow


class Recorder:
    """The run's display, kept: what was skipped, redone (and why), run."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str]] = []

    def skipped(self, title: str, detail: str) -> None:
        self.lines.append(("skipped", title, detail))

    def redoing(self, title: str, reason: str) -> None:
        self.lines.append(("redoing", title, reason))

    def started(self, title: str) -> None:
        self.lines.append(("started", title, ""))

    def finished(self, title: str, detail: str) -> None:
        self.lines.append(("finished", title, detail))

    def failed(self, title: str, error: str) -> None:
        self.lines.append(("failed", title, error))

    def note(self, message: str) -> None:
        self.lines.append(("note", "", message))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with ports_stack(tmp_path_factory.mktemp("onboard-checks"), ONBOARD_PASSPHRASE) as net:
        yield net


def options(net: dict, name: str, **kw) -> Options:
    extra = net["onboard_extra"]

    def flag(name: str) -> Path:
        return Path(extra[extra.index(name) + 1])

    base = dict(
        name=name, state_dir=net["tmp"] / f"state-{name}",
        keystore_dir=Path(net["env"]["NET_KEYSTORE"]), passphrase_file=net["pass"],
        rpc_url=net["rpc_ws"], faucet_url=net["faucet"], attestation_url=net["attestation"],
        gateway_url=net["gateway"], engine_url=TEST_ENGINE, no_gpu=True,
        gateway_key_file=flag("--gateway-key-file"), service_manager="supervisor",
        supervisor_conf=net["supervisor_conf"], timeout_s=60,
        # A short drain: the frozen worker's restart waits it out (plus the worker's shutdown)
        # before supervisord kills it.
        drain_timeout_s=5)
    return Options(**{**base, **kw})


def context(opts: Options, display: Recorder | None = None) -> Context:
    runner.prepare(opts)
    ctx = Context(opts, Journal.open(opts.journal_path, opts.name),
                  emit=(display or Recorder()).note)
    runner.preflight(ctx)
    return ctx


def settle(ctx: Context, step) -> runner.RunResult:
    result = runner.RunResult(ctx.journal)
    runner.settle(ctx, step, Recorder(), result)
    return result


def supervisor(net: dict) -> Supervisor:
    return Supervisor(net["supervisor_conf"])


@pytest.fixture(scope="module")
def worker(stack):
    """op-ck onboarded from nothing (its worker under the stack's supervisord)."""
    opts = options(stack, "op-ck", worker_port=free_port())
    display = Recorder()
    result = runner.onboard(opts, display)
    assert result.ran == list(runner.STEP_NAMES) and result.redone == {}
    try:
        yield opts
    finally:
        supervisor(stack).stop(opts.program)


def behind(ctx: Context, address: str) -> int:
    """Epochs between the chain's current one and the account's last heartbeat."""
    record = operator.operator_record(ctx.substrate(), address)
    return operator.current_epoch(ctx.substrate()) - int(record["last_heartbeat_epoch"])


def catch_up(net: dict, keypair, address: str, after_s: float) -> None:
    """What a worker back from a stall does: heartbeats stepping one epoch each up to the
    current one (on a client of its own: this runs beside the check's)."""
    time.sleep(after_s)
    substrate = rpc.connect(net["rpc_ws"])
    try:
        last = int(operator.operator_record(substrate, address)["last_heartbeat_epoch"])
        for epoch in range(last + 1, operator.current_epoch(substrate) + 1):
            assert operator.heartbeat(substrate, keypair, epoch, "op-fd").success
    finally:
        substrate.close()


def live(ctx: Context) -> bool:
    row = gateway_client.worker_view(ctx.options.gateway_url, ctx.keypair(),
                                     str(ctx.journal.genesis_hash))
    return bool(row and row.get("live"))


def test_a_run_where_everything_holds_redoes_nothing(worker):
    """Every check passes on what the onboarding left: nothing is redone (no false alarm)."""
    display = Recorder()
    started = time.monotonic()
    result = runner.onboard(worker, display)
    took = time.monotonic() - started
    print(f"\nonboard again, every step checked, nothing redone: {took:.1f} s")
    assert result.ran == [] and result.redone == {}
    assert result.skipped == list(runner.STEP_NAMES)
    assert [kind for kind, _title, _text in display.lines if kind != "note"] == ["skipped"] * 7


# --- daemon: the program, its files, the gateway's view --------------------------------------

@pytest.mark.parametrize("remove,reason", [
    ("stop", "is not running"),
    ("config", "worker.yml differs from what this run would write"),
    ("program", "net-worker-op-ck.conf is missing"),
    ("passphrase", "passphrase differs"),
])
def test_daemon_redone_when_its_worker_is_gone(stack, worker, remove, reason):
    if remove == "stop":
        supervisor(stack).stop(worker.program)
    elif remove == "config":
        path = worker.state_dir / "worker.yml"
        path.write_text(path.read_text().replace("log_level: info", "log_level: debug"))
    elif remove == "program":
        (worker.supervisor_conf.parent / "conf.d" / f"{worker.program}.conf").unlink()
    else:  # the worker's copy of the passphrase was changed behind the journal's back
        (worker.secrets_dir / "passphrase").write_text("not the passphrase")
    ctx = context(worker)
    why = daemon.check(ctx)
    assert why is not None and reason in why
    result = settle(ctx, daemon)
    assert result.ran == ["daemon"] and reason in result.redone["daemon"]
    assert supervisor(stack).process(worker.program).statename == "RUNNING"
    assert daemon.check(ctx) is None


def test_daemon_redone_when_the_gateway_does_not_list_it_live(stack, worker):
    """The program runs, its files are right, but the gateway has no live worker for it (the
    process is frozen): the check asks the gateway, not the service manager alone."""
    ctx = context(worker)
    assert daemon.check(ctx) is None
    pid = supervisor(stack).process(worker.program).pid
    # A stall the worker comes back from while the check reads again: it is not restarted.
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: not live(ctx), 60, "the gateway to drop the frozen worker")
    finally:
        threading.Timer(4.0, os.kill, (pid, signal.SIGCONT)).start()
    assert daemon.check(ctx) is None
    assert supervisor(stack).process(worker.program).pid == pid
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: not live(ctx), 60, "the gateway to drop the frozen worker")
        assert supervisor(stack).process(worker.program).statename == "RUNNING"
        # Redone while frozen: supervisord's restart ends it (SIGKILL after stopwaitsecs).
        result = settle(ctx, daemon)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert "does not list the worker as live" in result.redone["daemon"]
    assert supervisor(stack).process(worker.program).pid != pid
    # Live again, and the check holds (within an epoch or two: on this stack's 3 s epochs a
    # loaded machine can see the new worker's heartbeat arrive late for a moment).
    wait_for(lambda: live(ctx) and daemon.check(ctx) is None, 30,
             "the restarted worker to be live and its check to hold")


def test_daemon_waits_until_the_restarted_worker_holds_the_gateways_token(stack, worker):
    """A restarted worker answers ``/health`` at once, while the gateway may still list the
    process before it as live; until the gateway accepts its first announcement it refuses the
    gateway's requests (it holds no token), and the gateway cools it down after three. Here the
    announcement is held back 10 s (the development node frozen under the worker's first chain
    read): the step waits for the worker's ``/ready``, then a test request through the gateway
    is answered by it. (CI once saw all 80 test requests spent within the cool-down.)"""
    supervisor(stack).stop(worker.program)
    ctx = context(worker)
    why = daemon.check(ctx)
    assert why is not None and "is not running" in why
    answered = ctx.facts["test_request_id"]
    chain = stack["chain_pid"]
    os.kill(chain, signal.SIGSTOP)
    thaw = threading.Timer(10.0, os.kill, (chain, signal.SIGCONT))
    thaw.start()
    try:
        result = settle(ctx, daemon)
    finally:
        thaw.cancel()
        os.kill(chain, signal.SIGCONT)
    assert result.ran == ["daemon"] and "is not running" in result.redone["daemon"]
    # A test request through the gateway was answered by this worker, again.
    assert ctx.facts["test_request_id"] not in (None, answered)
    wait_for(lambda: live(ctx) and daemon.check(ctx) is None, 30,
             "the restarted worker to be live and its check to hold")


# --- attestation -----------------------------------------------------------------------------

def test_attestation_redone_when_the_service_does_not_know_the_report(stack, worker):
    ctx = context(worker)
    unknown = "0x" + "ab" * 32
    ctx.facts["attestation_hash"] = unknown
    ctx.journal.save()
    assert f"does not know report {unknown}" in attestation.check(ctx)
    result = settle(ctx, attestation)
    assert result.ran == ["attestation"]
    assert ctx.facts["attestation_hash"] not in (unknown, None)
    assert attestation.check(ctx) is None


def test_attestation_unreachable_redoes_nothing(stack, worker, tmp_path):
    opts = options(stack, worker.name, worker_port=worker.worker_port,
                   attestation_url=f"http://127.0.0.1:{free_port()}")
    ctx = context(opts)
    before = opts.journal_path.read_bytes()
    with pytest.raises(OpsError, match=r"cannot check the journaled report .* nothing was redone"):
        runner.settle(ctx, attestation, Recorder(), runner.RunResult(ctx.journal))
    assert opts.journal_path.read_bytes() == before


# --- wallet: never redone --------------------------------------------------------------------

def test_wallet_missing_from_the_keystore_is_an_error_naming_the_restore(stack, worker, tmp_path):
    empty = tmp_path / "new-keystore"
    opts = options(stack, worker.name, worker_port=worker.worker_port, keystore_dir=empty)
    ctx = context(opts)
    before = opts.journal_path.read_bytes()
    with pytest.raises(InputError) as err:
        runner.settle(ctx, wallet, Recorder(), runner.RunResult(ctx.journal))
    message = str(err.value)
    assert ctx.facts["account"] in message and "wallet-cli import op-ck" in message
    assert ctx.facts["mnemonic_backup"] in message and "no account was created" in message
    assert not empty.exists() or not any(empty.iterdir())
    assert opts.journal_path.read_bytes() == before


def test_wallet_of_another_account_under_the_name_is_an_error(stack, worker, tmp_path):
    other = Keystore(tmp_path / "other-keystore")
    keys = mnemonic_keys.keys_from_mnemonic(mnemonic_keys.generate_mnemonic(12))
    other.create(worker.name, keys, ONBOARD_PASSPHRASE)
    ctx = context(options(stack, worker.name, worker_port=worker.worker_port,
                          keystore_dir=other.root))
    with pytest.raises(InputError, match="not the journal's"):
        wallet.check(ctx)


def test_wallet_with_another_passphrase_is_refused(stack, worker, tmp_path):
    wrong = secret_file(tmp_path / "wrong", "not the passphrase")
    ctx = context(options(stack, worker.name, worker_port=worker.worker_port,
                          passphrase_file=wrong))
    with pytest.raises(InputError, match="wrong passphrase"):
        wallet.check(ctx)


def test_wallet_and_gpu_still_true_are_skipped(stack, worker):
    ctx = context(worker)
    assert wallet.check(ctx) is None and gpu.check(ctx) is None


# --- funding, stake, heartbeat: a journal claiming what the chain does not have ---------------

def test_funding_stake_and_heartbeat_redone_when_the_chain_lacks_them(stack, tmp_path):
    """A new account whose journal claims funding, registration and a heartbeat (as a journal
    of a network since re-created does): each check names what the chain lacks; each step is
    done again, in order, with the journal's attestation hash."""
    opts = options(stack, "op-fd", worker_port=free_port())
    keys = mnemonic_keys.keys_from_mnemonic(mnemonic_keys.generate_mnemonic(12))
    address = Keystore(opts.keystore_dir).create("op-fd", keys, ONBOARD_PASSPHRASE).ss58_address
    runner.prepare(opts)
    journal = Journal.open(opts.journal_path, "op-fd")
    for step, facts in (("gpu", {"gpu": {"no_gpu": True, "pci_devices": [], "gpus": [],
                                         "cc_mode": "unknown"}}),
                        ("wallet", {"account": address}), ("funding", {"funded_free": "1"})):
        journal.finish(journal.begin(step), "done earlier", facts)
    ctx = context(opts)

    result = settle(ctx, funding)
    assert f"the account {address} has 0 tokens" in result.redone["funding"]
    assert funding.check(ctx) is None  # the faucet's drip covers stake and fees

    settle(ctx, attestation)  # not done before: run
    ctx.journal.finish(ctx.journal.begin("stake"), "registered in block 31",
                       {"registered_at": 31,
                        "registered_attestation_hash": ctx.facts["attestation_hash"]})
    assert stake.check(ctx) == f"the chain has no registration for {address}"
    result = settle(ctx, stake)
    assert result.ran == ["stake"]
    record = operator.operator_record(ctx.substrate(), address)
    assert record["attestation_hash"] == ctx.facts["attestation_hash"]
    assert stake.check(ctx) is None
    ctx.facts["registered_attestation_hash"] = "0x" + "ef" * 32
    assert f"binds attestation {record['attestation_hash']}, not the journal's 0x{'ef' * 32}" \
        in stake.check(ctx)
    ctx.facts["registered_attestation_hash"] = record["attestation_hash"]

    # A heartbeat journaled for another registration (of the same block number, on a network
    # since re-created) is not this one's.
    number = int(record["registered_at"])
    other = [number, "0x" + "cd" * 32]
    ctx.journal.finish(ctx.journal.begin("heartbeat"), "heartbeat for epoch 4",
                       {"heartbeat_registration": other})
    assert f"the heartbeat was for the registration in block {number} (0xcdcdcdcd…)" in \
        heartbeat.check(ctx)
    ctx.facts["heartbeat_registration"] = [number, ctx.substrate().get_block_hash(number)]
    # No worker heartbeats for op-fd: two epochs (3 s each) later the rule is broken.
    wait_for(lambda: behind(ctx, address) > 1, 60, "the heartbeat to fall behind")
    # A worker that stalled catches up while the check reads again: nothing is redone.
    with ThreadPoolExecutor(1) as pool:
        caught_up = pool.submit(catch_up, stack, ctx.keypair(), address, 4.0)
        assert heartbeat.check(ctx) is None
        caught_up.result()
    assert behind(ctx, address) <= 1
    # One that does not: after the check's patience, the step sends the heartbeats itself.
    wait_for(lambda: behind(ctx, address) > 1, 60, "the heartbeat to fall behind again")
    result = settle(ctx, heartbeat)
    assert "more than MaxHeartbeatEpochAdvance" in result.redone["heartbeat"]
    # (Read at once: no worker keeps op-fd's heartbeats going, so a check's patience would see
    # it fall behind again.)
    assert result.ran == ["heartbeat"] and behind(ctx, address) <= 1
    ctx.close()


def test_a_chain_without_the_journaled_block_is_named_re_created(stack, worker):
    """Same genesis, another history: the preflight says so and every reason ends with it."""
    assert not context(worker).recreated
    journal = Journal.open(worker.journal_path, worker.name)
    journal.facts["chain_seen"] = [1, "0x" + "ee" * 32]  # a block 1 this chain never had
    journal.save()
    display = Recorder()
    ctx = context(worker, display)
    assert ctx.recreated
    assert any("the network was re-created" in text for kind, _t, text in display.lines
               if kind == "note")
    supervisor(stack).stop(worker.program)
    assert daemon.check(ctx).endswith("is not running (supervisor): the network was re-created")
