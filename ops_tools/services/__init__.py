"""Public services of the network (see docs/services.md)."""
