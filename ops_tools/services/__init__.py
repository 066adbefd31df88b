"""The network's HTTP services (faucet, attestation, indexer, gateway, explorer) and the worker."""
