"""The built-in runtime blob: a minimal wasm module that carries the runtime's version.

The development node executes its runtime in Python; ``:code`` identifies it. A digest of the
runtime definitions (its metadata) is embedded so that a change of the runtime changes the
blob, and with it the genesis hash, as a real runtime upgrade would.
"""

from __future__ import annotations

from functools import lru_cache

import orjson

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.runtime import RuntimeVersion, api, build_runtime_blob
from ops_tools.devnode.runtime.definitions import SPEC_VERSION, TRANSACTION_VERSION
from ops_tools.devnode.runtime.metadata import metadata_dict

SPEC_NAME = "net-dev"
APIS = [
    api("Core", 4),
    api("Metadata", 2),
    api("BlockBuilder", 6),
    api("TaggedTransactionQueue", 3),
    api("OffchainWorkerApi", 2),
    api("AuraApi", 1),
    api("GrandpaApi", 3),
    api("SessionKeys", 1),
    api("AccountNonceApi", 1),
    api("TransactionPaymentApi", 4),
    api("GenesisBuilder", 1),
]
VERSION = RuntimeVersion(
    spec_name=SPEC_NAME,
    impl_name="devnode",
    authoring_version=1,
    spec_version=SPEC_VERSION,
    impl_version=1,
    transaction_version=TRANSACTION_VERSION,
    state_version=1,
    apis=APIS,
)
_DIGEST_CONFIG = {
    "slot_duration": 0,
    "min_stake": 0,
    "epoch_length": 0,
    "max_heartbeat_epoch_advance": 0,
}


@lru_cache(maxsize=1)
def builtin_runtime() -> bytes:
    digest = blake2_256(orjson.dumps(metadata_dict(_DIGEST_CONFIG), option=orjson.OPT_SORT_KEYS))
    return build_runtime_blob(VERSION, extra_sections={"devnode_runtime": digest})
