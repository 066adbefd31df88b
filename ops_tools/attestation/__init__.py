"""The attestation report's shared, pure pieces: the TDX quote layout (``tdx``) and the
validation of request fields (``inputs``). The attestation service, the explorer (which shows
reports) and the wallet's callers read them here, so no service imports another."""
