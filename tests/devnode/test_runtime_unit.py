"""The runtime in-process: balances edge cases, fees, genesis and the runtime version of :code."""

from __future__ import annotations

import json

import pytest

from ops_tools.chainspec.runtime import RuntimeVersion, api, build_runtime_blob
from ops_tools.chainspec.scale import encode_compact
from ops_tools.chainspec.trie import trie_root
from ops_tools.devnode.chain_spec import builtin_plain, load_chain
from ops_tools.devnode.crypto import keypair_from_suri, ss58
from ops_tools.devnode.runtime.definitions import EXISTENTIAL_DEPOSIT, RUNTIME_CALL
from ops_tools.devnode.runtime.executive import RuntimeInfo, execute_block, fee_of
from ops_tools.devnode.runtime.extrinsic import Extrinsic, InvalidTransaction, decode_extrinsic
from ops_tools.devnode.runtime.state import State, read_config

TOKEN = 10**12


@pytest.fixture(scope="module")
def dev():
    return load_chain("dev")


def sign(
    suri: str, call: tuple, nonce: int, info: RuntimeInfo, scheme: str = "Sr25519"
) -> Extrinsic:
    pair = keypair_from_suri(suri, scheme)
    call_bytes = RUNTIME_CALL.encode(call)
    extra = b"\x00" + encode_compact(nonce) + encode_compact(0)
    payload = (
        call_bytes
        + extra
        + info.spec_version.to_bytes(4, "little")
        + info.transaction_version.to_bytes(4, "little")
        + info.genesis_hash
        + info.genesis_hash
    )
    sig = pair.sign(payload)
    body = (
        b"\x84"
        + b"\x00"
        + pair.public
        + (b"\x01" if scheme == "Sr25519" else b"\x00")
        + sig
        + extra
        + call_bytes
    )
    return decode_extrinsic(encode_compact(len(body)) + body)


def info_of(spec) -> RuntimeInfo:
    rt = spec.runtime
    return RuntimeInfo(
        spec.genesis.genesis_hash, rt.spec_version, rt.transaction_version, rt.state_version
    )


def run_block(spec, xts, state=None):
    return execute_block(
        state or State(spec.storage),
        number=1,
        parent_hash=spec.genesis.genesis_hash,
        slot=1,
        info=info_of(spec),
        extrinsics=xts,
        block_hash_at=lambda n: None,
        skip_invalid=False,
    )


def transfer(dest: bytes, value: int, keep_alive: bool) -> tuple:
    name = "transfer_keep_alive" if keep_alive else "transfer_allow_death"
    return ("Balances", (name, {"dest": ("Id", dest), "value": value}))


def events(result) -> list[tuple[str, str]]:
    return [(e["event"][0], e["event"][1][0]) for e in result.events]


def failure(result):
    failed = [e["event"][1][1] for e in result.events if e["event"][1][0] == "ExtrinsicFailed"]
    return failed[0]["dispatch_error"] if failed else None


def test_keep_alive_refuses_to_reap_and_allow_death_reaps(dev):
    info = info_of(dev)
    fresh = keypair_from_suri("//Fresh", "Sr25519").public
    bob = keypair_from_suri("//Bob", "Sr25519").public
    fund = run_block(dev, [sign("//Alice", transfer(fresh, TOKEN, True), 0, info)])
    assert ("System", "NewAccount") in events(fund) and ("Balances", "Endowed") in events(fund)
    # Same encoded length as the transfers below (values of the same compact size), so the same fee.
    config = read_config(fund.state)
    fee_keep = fee_of(config, sign("//Fresh", transfer(bob, TOKEN // 2, True), 0, info))
    fee = fee_of(config, sign("//Fresh", transfer(bob, TOKEN // 2, False), 0, info))
    kept = run_block(
        dev, [sign("//Fresh", transfer(bob, TOKEN - fee_keep, True), 0, info)], fund.state
    )
    assert failure(kept) == ("Token", "NotExpendable")
    reaped = run_block(
        dev, [sign("//Fresh", transfer(bob, TOKEN - fee - 5, False), 0, info)], fund.state
    )
    assert failure(reaped) is None
    assert ("Balances", "DustLost") in events(reaped) and ("System", "KilledAccount") in events(
        reaped
    )
    assert reaped.state.get("System", "Account", fresh)["providers"] == 0
    issuance_drop = fund.state.get("Balances", "TotalIssuance") - reaped.state.get(
        "Balances", "TotalIssuance"
    )
    assert issuance_drop == fee + 5  # the fee is burned and the dust is lost


def test_new_account_needs_the_existential_deposit_and_funds_must_exist(dev):
    info = info_of(dev)
    nobody = keypair_from_suri("//Nobody", "Sr25519").public
    small = run_block(
        dev, [sign("//Alice", transfer(nobody, EXISTENTIAL_DEPOSIT - 1, False), 0, info)]
    )
    assert failure(small) == (
        "Module",
        {"index": 4, "error": bytes((3, 0, 0, 0))},
    )  # ExistentialDeposit
    too_much = run_block(dev, [sign("//Bob", transfer(nobody, 1 << 61, False), 0, info)])
    assert failure(too_much) == (
        "Module",
        {"index": 4, "error": bytes((2, 0, 0, 0))},
    )  # InsufficientBalance
    # The failed call still paid its fee and used its nonce.
    assert (
        too_much.state.get("System", "Account", keypair_from_suri("//Bob", "Sr25519").public)[
            "nonce"
        ]
        == 1
    )


def test_block_import_rejects_what_the_pool_rejects(dev):
    info = info_of(dev)
    bob = keypair_from_suri("//Bob", "Sr25519").public
    with pytest.raises(InvalidTransaction, match="future"):
        run_block(dev, [sign("//Alice", transfer(bob, 1, True), 1, info)])
    with pytest.raises(InvalidTransaction, match="bad signature"):
        other = RuntimeInfo(
            bytes(32), info.spec_version, info.transaction_version, info.state_version
        )
        run_block(dev, [sign("//Alice", transfer(bob, 1, True), 0, other)])
    with pytest.raises(InvalidTransaction, match="pay"):
        run_block(dev, [sign("//Nobody", transfer(bob, 1, True), 0, info)])


def test_state_root_is_the_trie_root_of_the_full_state(dev):
    result = run_block(dev, [])
    assert result.state_root == trie_root(result.state.data, 1)
    assert result.state.get("OperatorStake", "CurrentEpoch") == 0
    assert result.state.get("Timestamp", "Now") == read_config(State(dev.storage)).slot_duration


def test_runtime_version_and_state_version_come_from_code(tmp_path):
    plain = builtin_plain("dev")
    version = RuntimeVersion("other-runtime", "x", 1, 7, 1, 2, 0, [api("Core", 4)])
    plain["genesis"]["runtimeGenesis"]["code"] = "0x" + build_runtime_blob(version).hex()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(plain))
    spec = load_chain(str(path))
    assert (spec.runtime.spec_name, spec.runtime.spec_version, spec.runtime.state_version) == (
        "other-runtime",
        7,
        0,
    )
    assert spec.genesis.state_root == trie_root(spec.storage, 0)
    assert run_block(spec, []).state_root == trie_root(run_block(spec, []).state.data, 0)
    assert spec.genesis.genesis_hash != load_chain("dev").genesis.genesis_hash


def test_dev_and_local_chains():
    local = builtin_plain("local")
    patch = local["genesis"]["runtimeGenesis"]["patch"]
    alice, bob = (ss58(keypair_from_suri(f"//{n}", "Sr25519").public) for n in ("Alice", "Bob"))
    assert patch["aura"]["authorities"] == [alice, bob]
    assert patch["sudo"]["key"] == alice
    assert len(patch["balances"]["balances"]) == 12
    assert local["id"] == "local_testnet" and builtin_plain("dev")["id"] == "dev"
