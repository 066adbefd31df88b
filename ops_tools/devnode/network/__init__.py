"""Peer-to-peer networking between development nodes (TCP on loopback in tests)."""
