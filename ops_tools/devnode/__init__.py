"""The development node: a Python stand-in for the pallet-suite's Substrate node.

It honours the node's outside contract (command line, chain spec formats, genesis hash,
JSON-RPC, Aura authoring, GRANDPA-like finality) so that the rest of the suite runs against a
real chain. It is a development and test tool only.
"""

NODE_VERSION = "0.1.0"
