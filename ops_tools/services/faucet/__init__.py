"""The faucet: small drips of the token to new accounts, rate-limited (docs/faucet.md)."""
