"""Alembic migrations of the faucet tables (run at every start, see store.py)."""
