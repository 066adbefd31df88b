"""The signed messages the worker and the gateway exchange, pure (no I/O): the gateway
heartbeat (``heartbeat``, also what ``wallet-cli heartbeat-test`` prints), the worker
announcement (``announce``) and the per-worker token the gateway answers with
(``worker_token``). Both sides import them from here, so neither depends on the other."""
