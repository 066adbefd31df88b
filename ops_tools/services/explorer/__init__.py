"""The attestation explorer: server-rendered pages over the attestation service and the chain."""
