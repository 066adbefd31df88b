"""The runtime, in Python: definitions, metadata, genesis builder and execution."""
