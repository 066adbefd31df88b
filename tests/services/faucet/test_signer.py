"""The signer against a real development node: consecutive nonces under concurrency, the
balance moves by the amount, the block holds the extrinsic, and a nonce taken behind the
signer's back is recovered from the chain."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import pytest
from substrateinterface import Keypair

from ops_tools.chain.rpc import RpcClient
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.services.faucet.signer import IDLE_FOLLOW_S, Signer, SignerError
from tests.support.devnode import DevNode, free_balance, fund, run_devnode

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

AMOUNT = 10_000_000_000_000  # 10 tokens


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    with run_devnode(tmp_path_factory.mktemp("devnode"), ["--dev"]) as n:
        yield n


@pytest.fixture(scope="module")
def faucet_key(node: DevNode) -> Keypair:
    key = Keypair.create_from_uri("//SignerTestFaucet", ss58_format=42)
    fund(node, {key.ss58_address: 10**18})
    return key


@pytest.fixture
def signer(node: DevNode, faucet_key: Keypair) -> Iterator[Signer]:
    s = Signer(node.http, faucet_key, poll_interval_s=0.1)
    try:
        yield s
    finally:
        s.close()


def fresh(tag: str) -> str:
    return Keypair.create_from_uri(f"//signer-test/{tag}", ss58_format=42).ss58_address


def test_transfer_moves_the_amount_and_the_block_holds_it(node: DevNode, signer: Signer) -> None:
    dest = fresh("one")
    ticket = signer.transfer(dest, AMOUNT)
    assert ticket.wait_included(60), ticket.failure
    assert free_balance(node.reader(), dest) == AMOUNT
    block = RpcClient(node.http).call("chain_getBlock", [ticket.block_hash])
    hashes = ["0x" + blake2_256(bytes.fromhex(x[2:])).hex() for x in block["block"]["extrinsics"]]
    assert ticket.extrinsic_hash in hashes
    assert int(block["block"]["header"]["number"], 16) == ticket.block_number
    assert ticket.wait_finalized(60)


def test_concurrent_transfers_get_consecutive_nonces(node: DevNode, signer: Signer) -> None:
    dests = [fresh(f"many/{i}") for i in range(20)]
    start = RpcClient(node.http).call("system_accountNextIndex", [signer.address])
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        tickets = list(pool.map(lambda d: signer.transfer(d, AMOUNT), dests))
    assert all(t.wait_included(60) for t in tickets), [t.failure for t in tickets]
    reader = node.reader()
    assert [free_balance(reader, d) for d in dests] == [AMOUNT] * 20
    end = RpcClient(node.http).call("system_accountNextIndex", [signer.address])
    assert end == start + 20


def test_nonce_used_elsewhere_is_reread_from_the_chain(
    node: DevNode, signer: Signer, faucet_key: Keypair
) -> None:
    first = signer.transfer(fresh("before"), AMOUNT)
    assert first.wait_included(60)
    # Another client spends the signer's next nonce: the cached one is now outdated.
    substrate = node.substrate()
    try:
        call = substrate.compose_call("Balances", "transfer_keep_alive",
                                      {"dest": fresh("elsewhere"), "value": AMOUNT})
        xt = substrate.create_signed_extrinsic(call=call, keypair=faucet_key)
        assert substrate.submit_extrinsic(xt, wait_for_inclusion=True).is_success
    finally:
        substrate.close()
    dest = fresh("after")
    ticket = signer.transfer(dest, AMOUNT)
    assert ticket.wait_included(60), ticket.failure
    assert free_balance(node.reader(), dest) == AMOUNT


def test_dispatch_failure_resolves_the_ticket_as_failed(node: DevNode, signer: Signer) -> None:
    dest = fresh("too-much")
    before = signer.balance()
    ticket = signer.transfer(dest, before * 2)
    assert not ticket.wait_included(60)
    assert ticket.failure is not None
    assert ticket.block_hash is not None
    assert free_balance(node.reader(), dest) == 0
    after = signer.balance()
    assert before - after < AMOUNT  # only the fee left the account


def test_pool_refusal_raises_and_leaves_the_nonce_to_the_chain(node: DevNode) -> None:
    broke = Signer(node.http, Keypair.create_from_uri("//signer-test/broke", ss58_format=42))
    try:
        with pytest.raises(SignerError) as info:
            broke.transfer(fresh("from-broke"), AMOUNT)
        assert info.value.spent is False
        assert info.value.code == "pool_rejected"
        assert "pay" in str(info.value).lower()
        assert broke.nonces.cached is None  # the next attempt asks the chain again
    finally:
        broke.close()


def test_an_idle_follower_reads_the_chain_seldom_and_a_transfer_wakes_it(
        node: DevNode, signer: Signer) -> None:
    """With nothing to follow, the follower does not poll the node every ``poll_interval_s``
    (0.1 s here): at most one read per IDLE_FOLLOW_S. A transfer is still followed at once."""
    first = signer.transfer(fresh("idle-1"), AMOUNT)
    assert first.wait_finalized(60)
    calls: list[str] = []
    rpc_call = signer._rpc.call

    def counted(method: str, *args: object, **kwargs: object) -> object:
        calls.append(method)
        return rpc_call(method, *args, **kwargs)

    signer._rpc.call = counted  # type: ignore[method-assign]
    time.sleep(0.5)  # the last finality check's round ends
    calls.clear()
    time.sleep(2 * IDLE_FOLLOW_S)
    assert len(calls) <= 3, f"{len(calls)} reads in {2 * IDLE_FOLLOW_S} s idle: {calls}"
    second = signer.transfer(fresh("idle-2"), AMOUNT)
    assert second.wait_included(60), second.failure
