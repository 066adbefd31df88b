"""Extrinsics submitted with substrate-interface, as a user of the network would."""

from __future__ import annotations

from typing import Any

from substrateinterface import Keypair, SubstrateInterface

TOKEN = 10**12


def fresh_account() -> Keypair:
    return Keypair.create_from_mnemonic(Keypair.generate_mnemonic(), ss58_format=42)


def submit(ws_url: str, signer: Keypair, pallet: str, call: str,
           params: dict[str, Any]) -> tuple[int, str]:
    """Submits and waits for inclusion; returns (block number, extrinsic hash)."""
    substrate = SubstrateInterface(url=ws_url, ss58_format=42)
    try:
        composed = substrate.compose_call(pallet, call, params)
        xt = substrate.create_signed_extrinsic(call=composed, keypair=signer)
        receipt = substrate.submit_extrinsic(xt, wait_for_inclusion=True)
        assert receipt.is_success, receipt.error_message
        number = substrate.get_block_number(receipt.block_hash)
        return number, receipt.extrinsic_hash
    finally:
        substrate.close()


def current_epoch(ws_url: str) -> int:
    substrate = SubstrateInterface(url=ws_url, ss58_format=42)
    try:
        return int(substrate.query("OperatorStake", "CurrentEpoch").value)
    finally:
        substrate.close()
