"""``net-worker``: an operator's inference worker beside an OpenAI-compatible engine.

It announces itself to the gateway (signed by the operator's hotkey), sends the signed gateway
heartbeat each epoch, submits the on-chain heartbeat, and forwards the gateway's requests to the
engine. The worker is an operator tool: besides ``chain`` and ``chainspec`` it uses ``wallet``
(keystore, heartbeat signing, the heartbeat extrinsic); ``wallet`` never imports it.
"""
