"""The attestation service: mock TDX v4 quotes plus mock GPU evidence, and their verifier."""
