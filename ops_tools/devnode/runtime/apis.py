"""The runtime APIs the node serves through ``state_call``, declared once.

``state_call`` decodes a call's arguments and encodes its result with these types, and metadata
V15 lists them (with the same types in its registry), so a client that builds its runtime
calls from the metadata (``api.call.*`` of @polkadot/api) encodes what the node decodes.
The versions clients check live in the runtime version's API list (``blob.APIS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ops_tools.chainspec.scale import Reader
from ops_tools.devnode.runtime.definitions import (
    ACCOUNT_ID,
    BYTES,
    DISPATCH_CLASS,
    UNCHECKED_EXTRINSIC,
    WEIGHT,
)
from ops_tools.devnode.runtime.types import (
    STR,
    U8,
    U32,
    U128,
    Array,
    Composite,
    Field,
    Option,
    Seq,
    Tuple,
    Type,
)

# The metadata versions served by ``Metadata_metadata_at_version``; ``Metadata_metadata`` (and
# ``state_getMetadata``) serve the first, which every client of the suite decodes.
METADATA_VERSIONS = (14, 15)


@dataclass(frozen=True)
class ApiMethod:
    name: str
    inputs: tuple[tuple[str, Type], ...]
    output: Type
    docs: str

    def decode_args(self, data: bytes) -> list[Any]:
        # As a runtime does: inputs decoded in order, trailing bytes ignored.
        r = Reader(data, "runtime call arguments")
        return [t.decode(r) for _, t in self.inputs]


@dataclass(frozen=True)
class RuntimeApi:
    name: str
    methods: tuple[ApiMethod, ...]
    docs: str


RUNTIME_VERSION = Composite(
    "sp_version::RuntimeVersion",
    [
        Field("spec_name", STR, "Cow<'static, str>"),
        Field("impl_name", STR, "Cow<'static, str>"),
        Field("authoring_version", U32, "u32"),
        Field("spec_version", U32, "u32"),
        Field("impl_version", U32, "u32"),
        Field("apis", Seq(Tuple(Array(8, U8), U32)), "ApisVec"),
        Field("transaction_version", U32, "u32"),
        Field("system_version", U8, "u8"),
    ],
)
OPAQUE_METADATA = Composite("sp_core::OpaqueMetadata", [Field(None, BYTES, "Vec<u8>")])
RUNTIME_DISPATCH_INFO = Composite(
    "pallet_transaction_payment::types::RuntimeDispatchInfo",
    [
        Field("weight", WEIGHT, "Weight"),
        Field("class", DISPATCH_CLASS, "DispatchClass"),
        Field("partial_fee", U128, "Balance"),
    ],
    params=[("Balance", U128), ("Weight", WEIGHT)],
)

RUNTIME_APIS: tuple[RuntimeApi, ...] = (
    RuntimeApi(
        "Core",
        (ApiMethod("version", (), RUNTIME_VERSION, "Returns the version of the runtime."),),
        "The `Core` runtime api that every Substrate runtime needs to implement.",
    ),
    RuntimeApi(
        "Metadata",
        (
            ApiMethod("metadata", (), OPAQUE_METADATA, "Returns the metadata of a runtime."),
            ApiMethod(
                "metadata_at_version",
                (("version", U32),),
                Option(OPAQUE_METADATA),
                "Returns the metadata at a given version; None if the version is not supported.",
            ),
            ApiMethod(
                "metadata_versions",
                (),
                Seq(U32),
                "Returns the supported metadata versions.",
            ),
        ),
        "The `Metadata` api trait that returns metadata for the runtime.",
    ),
    RuntimeApi(
        "AccountNonceApi",
        (
            ApiMethod(
                "account_nonce",
                (("account", ACCOUNT_ID),),
                U32,
                "Get current account nonce of given `AccountId`.",
            ),
        ),
        "The API to query account nonce.",
    ),
    RuntimeApi(
        "TransactionPaymentApi",
        (
            ApiMethod(
                "query_info",
                (("uxt", UNCHECKED_EXTRINSIC), ("len", U32)),
                RUNTIME_DISPATCH_INFO,
                "The weight, class and partial fee of an extrinsic.",
            ),
        ),
        "The API to query the fee of an extrinsic.",
    ),
)

# ``state_call`` names: ``<Api>_<method>``.
BY_CALL_NAME: dict[str, ApiMethod] = {
    f"{api.name}_{m.name}": m for api in RUNTIME_APIS for m in api.methods
}
