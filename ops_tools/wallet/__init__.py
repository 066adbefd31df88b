"""``wallet-cli``: the operator tool of the interface document.

One BIP39 mnemonic gives an operator's sr25519 hotkey (ss58 prefix 42) and EVM-bridge key
(BIP44 m/44'/60'/0'/0/0); both live encrypted in a keystore directory. The chain side
(balance, ``OperatorStake::register``, ``OperatorStake::heartbeat``) goes through
substrate-interface. ``verify_heartbeat_payload`` is what a gateway uses to check the signed
heartbeat payload that ``wallet-cli heartbeat-test`` prints.
"""

from __future__ import annotations

from ops_tools.wallet.heartbeat_payload import (
    HEARTBEAT_SCHEME,
    canonical_message,
    sign_heartbeat,
    verify_heartbeat_payload,
)

__all__ = ["HEARTBEAT_SCHEME", "canonical_message", "sign_heartbeat", "verify_heartbeat_payload"]
