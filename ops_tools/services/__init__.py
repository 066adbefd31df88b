"""The network's public services (faucet, attestation, explorer, indexer, gateway, worker).

Each service is a subpackage with its own console script; ``common`` is the platform they all
stand on (settings, storage and migrations, the error shape, health/readiness/metrics, logs,
client addresses, rate limits, the server). Services may use ``chainspec`` and ``chain``; they
never import ``deploy``, ``reset`` or ``cli``.
"""
