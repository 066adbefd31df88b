"""``wallet-cli``: the operator tool of the interface document.

One BIP39 mnemonic gives an operator's sr25519 hotkey (ss58 prefix 42) and EVM-bridge key
(BIP44 m/44'/60'/0'/0/0); both live encrypted in a keystore directory. The chain side
(balance, ``OperatorStake::register``, ``OperatorStake::heartbeat``) goes through
``ops_tools.chain``; the signed heartbeat payload that ``wallet-cli heartbeat-test`` prints is
``ops_tools.chain.wire.heartbeat``.
"""
