"""Chain specs: SCALE and trie math, runtime inspection, genesis hash, rendering.

The base of the suite: it imports no other ``ops_tools`` subpackage, so the node, the build,
the deploy and the reset code all agree on one implementation of the genesis computation.
"""

from ops_tools.chainspec.genesis import GenesisInfo, compute_genesis, genesis_hash_from_state_root
from ops_tools.chainspec.runtime import RuntimeVersion, read_runtime_version
from ops_tools.chainspec.spec import load_spec
from ops_tools.chainspec.trie import EMPTY_TRIE_ROOT, trie_root

__all__ = [
    "EMPTY_TRIE_ROOT",
    "GenesisInfo",
    "RuntimeVersion",
    "compute_genesis",
    "genesis_hash_from_state_root",
    "load_spec",
    "read_runtime_version",
    "trie_root",
]
