"""The runtime's shape, declared once: pallets, calls, events, errors, storage, constants.

Execution (``dispatch``, ``executive``) and metadata (``metadata``) both read these objects.
Pallet indices follow the node template's order, then the network's own pallets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ops_tools.chainspec.hashing import STORAGE_HASHERS, storage_prefix
from ops_tools.devnode.runtime.types import (
    U8,
    U16,
    U32,
    U64,
    U128,
    UNIT,
    Array,
    Compact,
    Composite,
    Enum,
    Field,
    Seq,
    Tuple,
    Type,
    Variant,
    unit_enum,
)

# ---- primitives with the paths clients recognise ------------------------------------------------
BYTES = Seq(U8)
ACCOUNT_ID = Composite("sp_core::crypto::AccountId32", [Field(None, Array(32, U8), "[u8; 32]")])
H256 = Composite("primitive_types::H256", [Field(None, Array(32, U8), "[u8; 32]")])
SR25519_PUBLIC = Composite("sp_core::sr25519::Public", [Field(None, Array(32, U8), "[u8; 32]")])
ED25519_PUBLIC = Composite("sp_core::ed25519::Public", [Field(None, Array(32, U8), "[u8; 32]")])
AURA_ID = Composite(
    "sp_consensus_aura::sr25519::app_sr25519::Public", [Field(None, SR25519_PUBLIC)]
)
GRANDPA_ID = Composite("sp_consensus_grandpa::app::Public", [Field(None, ED25519_PUBLIC)])
ACCOUNT_INDEX = U32
MULTI_ADDRESS = Enum(
    "sp_runtime::multiaddress::MultiAddress",
    [
        Variant(0, "Id", (Field(None, ACCOUNT_ID, "AccountId"),)),
        Variant(1, "Index", (Field(None, Compact(ACCOUNT_INDEX), "AccountIndex"),)),
        Variant(2, "Raw", (Field(None, BYTES, "Vec<u8>"),)),
        Variant(3, "Address32", (Field(None, Array(32, U8), "[u8; 32]"),)),
        Variant(4, "Address20", (Field(None, Array(20, U8), "[u8; 20]"),)),
    ],
    params=[("AccountId", ACCOUNT_ID), ("AccountIndex", ACCOUNT_INDEX)],
)
SIG64 = Array(64, U8)
MULTI_SIGNATURE = Enum(
    "sp_runtime::MultiSignature",
    [
        Variant(
            0,
            "Ed25519",
            (Field(None, Composite("sp_core::ed25519::Signature", [Field(None, SIG64)])),),
        ),
        Variant(
            1,
            "Sr25519",
            (Field(None, Composite("sp_core::sr25519::Signature", [Field(None, SIG64)])),),
        ),
        Variant(
            2,
            "Ecdsa",
            (Field(None, Composite("sp_core::ecdsa::Signature", [Field(None, Array(65, U8))])),),
        ),
    ],
)
ERA = Enum(
    "sp_runtime::generic::era::Era",
    [Variant(0, "Immortal")]
    + [Variant(i, f"Mortal{i}", (Field(None, U8),)) for i in range(1, 256)],
)
WEIGHT = Composite(
    "sp_weights::weight_v2::Weight",
    [
        Field("ref_time", Compact(U64), "u64"),
        Field("proof_size", Compact(U64), "u64"),
    ],
)
DISPATCH_CLASS = unit_enum(
    "frame_support::dispatch::DispatchClass", ["Normal", "Operational", "Mandatory"]
)
PAYS = unit_enum("frame_support::dispatch::Pays", ["Yes", "No"])
DISPATCH_INFO = Composite(
    "frame_support::dispatch::DispatchInfo",
    [
        Field("weight", WEIGHT, "Weight"),
        Field("class", DISPATCH_CLASS, "DispatchClass"),
        Field("pays_fee", PAYS, "Pays"),
    ],
)
MODULE_ERROR = Composite(
    "sp_runtime::ModuleError",
    [
        Field("index", U8, "u8"),
        Field("error", Array(4, U8), "[u8; MAX_MODULE_ERROR_ENCODED_SIZE]"),
    ],
)
TOKEN_ERROR = unit_enum(
    "sp_runtime::TokenError",
    [
        "FundsUnavailable",
        "OnlyProvider",
        "BelowMinimum",
        "CannotCreate",
        "UnknownAsset",
        "Frozen",
        "Unsupported",
        "CannotCreateHold",
        "NotExpendable",
        "Blocked",
    ],
)
ARITHMETIC_ERROR = unit_enum(
    "sp_arithmetic::ArithmeticError", ["Underflow", "Overflow", "DivisionByZero"]
)
TRANSACTIONAL_ERROR = unit_enum("sp_runtime::TransactionalError", ["LimitReached", "NoLayer"])
DISPATCH_ERROR = Enum(
    "sp_runtime::DispatchError",
    [
        Variant(0, "Other"),
        Variant(1, "CannotLookup"),
        Variant(2, "BadOrigin"),
        Variant(3, "Module", (Field(None, MODULE_ERROR, "ModuleError"),)),
        Variant(4, "ConsumerRemaining"),
        Variant(5, "NoProviders"),
        Variant(6, "TooManyConsumers"),
        Variant(7, "Token", (Field(None, TOKEN_ERROR, "TokenError"),)),
        Variant(8, "Arithmetic", (Field(None, ARITHMETIC_ERROR, "ArithmeticError"),)),
        Variant(9, "Transactional", (Field(None, TRANSACTIONAL_ERROR, "TransactionalError"),)),
        Variant(10, "Exhausted"),
        Variant(11, "Corruption"),
        Variant(12, "Unavailable"),
        Variant(13, "RootNotAllowed"),
    ],
)
DISPATCH_RESULT = Enum(
    "Result",
    [
        Variant(0, "Ok", (Field(None, UNIT),)),
        Variant(1, "Err", (Field(None, DISPATCH_ERROR),)),
    ],
    params=[("T", UNIT), ("E", DISPATCH_ERROR)],
)
ACCOUNT_DATA = Composite(
    "pallet_balances::types::AccountData",
    [
        Field("free", U128, "Balance"),
        Field("reserved", U128, "Balance"),
        Field("frozen", U128, "Balance"),
        Field(
            "flags",
            Composite("pallet_balances::types::ExtraFlags", [Field(None, U128, "u128")]),
            "ExtraFlags",
        ),
    ],
    params=[("Balance", U128)],
)
ACCOUNT_INFO = Composite(
    "frame_system::AccountInfo",
    [
        Field("nonce", U32, "Nonce"),
        Field("consumers", U32, "RefCount"),
        Field("providers", U32, "RefCount"),
        Field("sufficients", U32, "RefCount"),
        Field("data", ACCOUNT_DATA, "AccountData"),
    ],
    params=[("Nonce", U32), ("AccountData", ACCOUNT_DATA)],
)
DIGEST_ITEM = Enum(
    "sp_runtime::generic::digest::DigestItem",
    [
        Variant(
            6,
            "PreRuntime",
            (Field(None, Array(4, U8), "ConsensusEngineId"), Field(None, BYTES, "Vec<u8>")),
        ),
        Variant(
            4,
            "Consensus",
            (Field(None, Array(4, U8), "ConsensusEngineId"), Field(None, BYTES, "Vec<u8>")),
        ),
        Variant(
            5,
            "Seal",
            (Field(None, Array(4, U8), "ConsensusEngineId"), Field(None, BYTES, "Vec<u8>")),
        ),
        Variant(0, "Other", (Field(None, BYTES, "Vec<u8>"),)),
        Variant(8, "RuntimeEnvironmentUpdated"),
    ],
)
DIGEST = Composite(
    "sp_runtime::generic::digest::Digest", [Field("logs", Seq(DIGEST_ITEM), "Vec<DigestItem>")]
)
FIXED_U128 = Composite("sp_arithmetic::fixed_point::FixedU128", [Field(None, U128, "u128")])
OPERATOR = Composite(
    "pallet_operator_stake::OperatorInfo",
    [
        Field("stake", U128, "Balance"),
        Field("attestation_hash", H256, "H256"),
        Field("last_heartbeat_epoch", U64, "EpochIndex"),
        Field("registered_at", U32, "BlockNumber"),
    ],
)
OPERATOR_PARAMS = Composite(
    "pallet_operator_stake::Params",
    [
        Field("min_stake", U128, "Balance"),
        Field("epoch_length", U64, "BlockNumber"),
        Field("max_heartbeat_epoch_advance", U64, "EpochIndex"),
    ],
)
FEE_PARAMS = Composite(
    "pallet_transaction_payment::FeeParams",
    [
        Field("base_fee", U128, "Balance"),
        Field("length_fee", U128, "Balance"),
        Field("weight_fee", U128, "Balance"),
    ],
)

# Values fixed by the runtime (its code), not by the chain spec.
EXISTENTIAL_DEPOSIT = 1_000_000_000  # 0.001 token
SS58_PREFIX = 42
TOKEN_DECIMALS = 12
SPEC_VERSION = 6
TRANSACTION_VERSION = 1
ERROR_DOCS = {
    "StakeBelowMinimum": "The stake is below MinStake.",
    "AlreadyRegistered": "The account is already registered as an operator.",
    "InsufficientBalance": "The free balance cannot cover the stake and the existential deposit.",
    "NotRegistered": "The account is not a registered operator.",
    "HeartbeatEpochInPast": "The epoch is before the operator's last heartbeat epoch.",
    "HeartbeatEpochTooFarAhead": "The epoch is over MaxHeartbeatEpochAdvance after the last one.",
}


@lru_cache(maxsize=256)
def _prefix(pallet: str, item: str) -> bytes:
    return storage_prefix(pallet, item)  # hashed once: it is on every storage access


@dataclass
class StorageItem:
    name: str
    value: Type
    hasher: str | None = None  # None: a plain value; else a map with this hasher
    key: Type | None = None
    default: bytes | None = None  # None: modifier Optional
    docs: str = ""

    def key_of(self, pallet: str, map_key: Any = None) -> bytes:
        prefix = _prefix(pallet, self.name)
        if self.hasher is None:
            return prefix
        assert self.key is not None
        return prefix + STORAGE_HASHERS[self.hasher](self.key.encode(map_key))


@dataclass
class Constant:
    name: str
    type: Type
    value: Callable[[dict[str, Any]], Any]  # from the chain's config (read from genesis storage)
    docs: str = ""


@dataclass
class CallDef:
    name: str
    index: int
    fields: tuple[Field, ...]
    ref_time: int  # the call's weight; it also prices the call
    docs: str = ""


@dataclass
class Pallet:
    name: str
    index: int
    calls: list[CallDef] = field(default_factory=list)
    events: list[Variant] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    storage: list[StorageItem] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    call_type: Enum | None = None
    event_type: Enum | None = None
    error_type: Enum | None = None

    def item(self, name: str) -> StorageItem:
        return next(s for s in self.storage if s.name == name)

    def key(self, item: str, map_key: Any = None) -> bytes:
        return self.item(item).key_of(self.name, map_key)

    def error_index(self, name: str) -> int:
        return self.errors.index(name)


def F(name: str, t: Type, type_name: str | None = None) -> Field:
    return Field(name, t, type_name)


def _ev(i: int, name: str, *fields: Field, docs: str = "") -> Variant:
    return Variant(i, name, tuple(fields), (docs,) if docs else ())


ACC = F("who", ACCOUNT_ID, "T::AccountId")
RUNTIME_CALL = Enum("node_runtime::RuntimeCall")
BOXED_CALL = RUNTIME_CALL  # Box<RuntimeCall> is transparent in scale-info

PALLETS: list[Pallet] = [
    Pallet(
        "System",
        0,
        calls=[
            CallDef(
                "remark",
                0,
                (F("remark", BYTES, "Vec<u8>"),),
                1_000_000,
                "Make some on-chain remark.",
            )
        ],
        events=[
            _ev(0, "ExtrinsicSuccess", F("dispatch_info", DISPATCH_INFO, "DispatchInfo")),
            _ev(
                1,
                "ExtrinsicFailed",
                F("dispatch_error", DISPATCH_ERROR, "DispatchError"),
                F("dispatch_info", DISPATCH_INFO, "DispatchInfo"),
            ),
            _ev(2, "CodeUpdated"),
            _ev(3, "NewAccount", F("account", ACCOUNT_ID, "T::AccountId")),
            _ev(4, "KilledAccount", F("account", ACCOUNT_ID, "T::AccountId")),
            _ev(5, "Remarked", F("sender", ACCOUNT_ID, "T::AccountId"), F("hash", H256, "T::Hash")),
        ],
        errors=[
            "InvalidSpecName",
            "SpecVersionNeedsToIncrease",
            "FailedToExtractRuntimeVersion",
            "NonDefaultComposite",
            "NonZeroRefCount",
            "CallFiltered",
        ],
        storage=[
            StorageItem(
                "Account",
                ACCOUNT_INFO,
                "Blake2_128Concat",
                ACCOUNT_ID,
                ACCOUNT_INFO.encode(
                    {
                        "nonce": 0,
                        "consumers": 0,
                        "providers": 0,
                        "sufficients": 0,
                        "data": {"free": 0, "reserved": 0, "frozen": 0, "flags": 0},
                    }
                ),
                "The full account information for a particular account ID.",
            ),
            StorageItem(
                "Number", U32, default=bytes(4), docs="The current block number being processed."
            ),
            StorageItem("ParentHash", H256, default=bytes(32), docs="Hash of the previous block."),
            # Typed below, once RuntimeEvent exists.
            StorageItem(
                "Events", UNIT, default=b"\x00", docs="Events deposited for the current block."
            ),
            StorageItem("Digest", DIGEST, default=b"\x00", docs="Digest of the current block."),
            StorageItem(
                "EventCount", U32, default=bytes(4), docs="The number of events in `Events`."
            ),
        ],
        constants=[
            Constant("SS58Prefix", U16, lambda c: SS58_PREFIX),
        ],
    ),
    Pallet(
        "Timestamp",
        1,
        storage=[
            StorageItem(
                "Now", U64, default=bytes(8), docs="The current time for the current block (ms)."
            )
        ],
        constants=[Constant("MinimumPeriod", U64, lambda c: c["slot_duration"] // 2)],
    ),
    Pallet(
        "Aura",
        2,
        storage=[
            StorageItem(
                "Authorities", Seq(AURA_ID), default=b"\x00", docs="The current authority set."
            ),
            StorageItem(
                "CurrentSlot", U64, default=bytes(8), docs="The current slot of this block."
            ),
            StorageItem(
                "SlotDuration",
                U64,
                default=bytes(8),
                docs="Slot duration in milliseconds, from the chain spec (development node).",
            ),
        ],
        constants=[Constant("SlotDuration", U64, lambda c: c["slot_duration"])],
    ),
    Pallet(
        "Grandpa",
        3,
        storage=[
            StorageItem(
                "Authorities",
                Seq(Tuple(GRANDPA_ID, U64)),
                default=b"\x00",
                docs="The current GRANDPA authority set with weights.",
            ),
            StorageItem(
                "CurrentSetId", U64, default=bytes(8), docs="The number of changes to the set."
            ),
        ],
    ),
    Pallet(
        "Balances",
        4,
        calls=[
            CallDef(
                "transfer_allow_death",
                0,
                (
                    F("dest", MULTI_ADDRESS, "AccountIdLookupOf<T>"),
                    F("value", Compact(U128), "T::Balance"),
                ),
                200_000_000,
                "Transfer some liquid free balance to another account.",
            ),
            CallDef(
                "transfer_keep_alive",
                3,
                (
                    F("dest", MULTI_ADDRESS, "AccountIdLookupOf<T>"),
                    F("value", Compact(U128), "T::Balance"),
                ),
                150_000_000,
                "Transfer, refusing to kill the sender's account.",
            ),
            CallDef(
                "force_set_balance",
                8,
                (
                    F("who", MULTI_ADDRESS, "AccountIdLookupOf<T>"),
                    F("new_free", Compact(U128), "T::Balance"),
                ),
                100_000_000,
                "Set an account's free balance (root only).",
            ),
        ],
        events=[
            _ev(
                0,
                "Endowed",
                F("account", ACCOUNT_ID, "T::AccountId"),
                F("free_balance", U128, "T::Balance"),
            ),
            _ev(
                1,
                "DustLost",
                F("account", ACCOUNT_ID, "T::AccountId"),
                F("amount", U128, "T::Balance"),
            ),
            _ev(
                2,
                "Transfer",
                F("from", ACCOUNT_ID, "T::AccountId"),
                F("to", ACCOUNT_ID, "T::AccountId"),
                F("amount", U128, "T::Balance"),
            ),
            _ev(3, "BalanceSet", ACC, F("free", U128, "T::Balance")),
            _ev(4, "Reserved", ACC, F("amount", U128, "T::Balance")),
            _ev(5, "Unreserved", ACC, F("amount", U128, "T::Balance")),
            _ev(7, "Deposit", ACC, F("amount", U128, "T::Balance")),
            _ev(8, "Withdraw", ACC, F("amount", U128, "T::Balance")),
        ],
        errors=[
            "VestingBalance",
            "LiquidityRestrictions",
            "InsufficientBalance",
            "ExistentialDeposit",
            "Expendability",
            "ExistingVestingSchedule",
            "DeadAccount",
            "TooManyReserves",
            "TooManyHolds",
            "TooManyFreezes",
            "IssuanceDeactivated",
            "DeltaZero",
        ],
        storage=[
            StorageItem("TotalIssuance", U128, default=bytes(16), docs="The total units issued.")
        ],
        constants=[Constant("ExistentialDeposit", U128, lambda c: EXISTENTIAL_DEPOSIT)],
    ),
    Pallet(
        "TransactionPayment",
        5,
        events=[
            _ev(
                0,
                "TransactionFeePaid",
                ACC,
                F("actual_fee", U128, "BalanceOf<T>"),
                F("tip", U128, "BalanceOf<T>"),
            )
        ],
        storage=[
            StorageItem("NextFeeMultiplier", FIXED_U128, default=(10**18).to_bytes(16, "little")),
            StorageItem(
                "FeeParams",
                FEE_PARAMS,
                default=None,
                docs="fee = base_fee + length_fee * length + weight_fee * ref_time / 10^6",
            ),
        ],
        constants=[Constant("OperationalFeeMultiplier", U8, lambda c: 5)],
    ),
    Pallet(
        "Sudo",
        6,
        calls=[
            CallDef(
                "sudo",
                0,
                (F("call", BOXED_CALL, "Box<<T as Config>::RuntimeCall>"),),
                10_000_000,
                "Dispatch a call with Root origin.",
            )
        ],
        events=[_ev(0, "Sudid", F("sudo_result", DISPATCH_RESULT, "DispatchResult"))],
        errors=["RequireSudo"],
        storage=[StorageItem("Key", ACCOUNT_ID, docs="The `AccountId` of the sudo key.")],
    ),
    Pallet(
        "OperatorStake",
        7,
        calls=[
            CallDef(
                "register",
                0,
                (F("stake", U128, "BalanceOf<T>"), F("attestation_hash", H256, "H256")),
                300_000_000,
                "Register the caller as an operator, reserving `stake`.",
            ),
            CallDef(
                "heartbeat",
                1,
                (F("epoch", U64, "EpochIndex"),),
                100_000_000,
                "Prove liveness for `epoch`: last <= epoch <= last + MaxHeartbeatEpochAdvance.",
            ),
        ],
        events=[
            _ev(
                0,
                "OperatorRegistered",
                ACC,
                F("stake", U128, "BalanceOf<T>"),
                F("attestation_hash", H256, "H256"),
            ),
            _ev(1, "HeartbeatReceived", ACC, F("epoch", U64, "EpochIndex")),
        ],
        errors=list(ERROR_DOCS),
        storage=[
            StorageItem(
                "Operators", OPERATOR, "Blake2_128Concat", ACCOUNT_ID, docs="Registered operators."
            ),
            StorageItem("CurrentEpoch", U64, default=bytes(8), docs="block_number / EpochLength."),
            StorageItem(
                "Params", OPERATOR_PARAMS, docs="MinStake, EpochLength, MaxHeartbeatEpochAdvance."
            ),
        ],
        constants=[
            Constant("MinStake", U128, lambda c: c["min_stake"]),
            Constant("MaxHeartbeatEpochAdvance", U64, lambda c: c["max_heartbeat_epoch_advance"]),
            Constant("EpochLength", U64, lambda c: c["epoch_length"]),
        ],
    ),
]

# The five pallets whose logic is placeholder code on the network: one signed call each that
# only emits an event (the fee is still charged).
PLACEHOLDERS: list[tuple[str, str, Field]] = [
    ("BondingCurve", "quote", F("amount", U128, "BalanceOf<T>")),
    ("Consensus", "signal", F("round", U64, "u64")),
    ("Slashing", "report_offence", F("offender", ACCOUNT_ID, "T::AccountId")),
    ("AttestationRegistry", "submit_attestation", F("report_hash", H256, "H256")),
    ("OracleTwap", "submit_price", F("price", U128, "u128")),
]
for _i, (_name, _call, _field) in enumerate(PLACEHOLDERS):
    PALLETS.append(
        Pallet(
            _name,
            8 + _i,
            calls=[
                CallDef(
                    _call, 0, (_field,), 50_000_000, "Placeholder: accepted, no economic effect."
                )
            ],
            events=[_ev(0, "PlaceholderCalled", ACC, F("call", BYTES, "Vec<u8>"))],
            errors=["Placeholder"],
        )
    )

BY_NAME = {p.name: p for p in PALLETS}
BY_INDEX = {p.index: p for p in PALLETS}

# ---- outer enums --------------------------------------------------------------------------------
for _p in PALLETS:
    if _p.calls:
        _p.call_type = Enum(
            f"pallet_{_p.name.lower()}::pallet::Call",
            [Variant(c.index, c.name, c.fields, (c.docs,) if c.docs else ()) for c in _p.calls],
        )
    if _p.events:
        _p.event_type = Enum(f"pallet_{_p.name.lower()}::pallet::Event", _p.events)
    if _p.errors:
        _p.error_type = Enum(
            f"pallet_{_p.name.lower()}::pallet::Error",
            [Variant(i, n, (), (ERROR_DOCS.get(n, n),)) for i, n in enumerate(_p.errors)],
        )

RUNTIME_CALL.set_variants(
    [
        Variant(
            p.index,
            p.name,
            (
                Field(
                    None,
                    p.call_type,
                    f"self::sp_api_hidden_includes_construct_runtime::hidden_include::dispatch"
                    f"::CallableCallFor<{p.name}, Runtime>",
                ),
            ),
        )
        for p in PALLETS
        if p.call_type is not None
    ]
)
RUNTIME_EVENT = Enum(
    "node_runtime::RuntimeEvent",
    [
        Variant(p.index, p.name, (Field(None, p.event_type, f"{p.name}Event"),))
        for p in PALLETS
        if p.event_type is not None
    ],
)
# Metadata V15 names the outer error enum; nothing at runtime encodes it (a dispatch error is
# ``Module{index, error}`` bytes).
RUNTIME_ERROR = Enum(
    "node_runtime::RuntimeError",
    [
        Variant(p.index, p.name, (Field(None, p.error_type, f"{p.name}Error"),))
        for p in PALLETS
        if p.error_type is not None
    ],
)
PHASE = Enum(
    "frame_system::Phase",
    [
        Variant(0, "ApplyExtrinsic", (Field(None, U32, "u32"),)),
        Variant(1, "Finalization"),
        Variant(2, "Initialization"),
    ],
)
EVENT_RECORD = Composite(
    "frame_system::EventRecord",
    [
        Field("phase", PHASE, "Phase"),
        Field("event", RUNTIME_EVENT, "E"),
        Field("topics", Seq(H256), "Vec<T>"),
    ],
    params=[("E", RUNTIME_EVENT), ("T", H256)],
)
EVENTS = Seq(EVENT_RECORD)
BY_NAME["System"].item("Events").value = EVENTS

# Signed extensions in the standard order; (identifier, extra type, additional-signed type).
SIGNED_EXTENSIONS: list[tuple[str, Type, Type]] = [
    (
        "CheckNonZeroSender",
        Composite("frame_system::extensions::check_non_zero_sender::CheckNonZeroSender", []),
        UNIT,
    ),
    (
        "CheckSpecVersion",
        Composite("frame_system::extensions::check_spec_version::CheckSpecVersion", []),
        U32,
    ),
    (
        "CheckTxVersion",
        Composite("frame_system::extensions::check_tx_version::CheckTxVersion", []),
        U32,
    ),
    ("CheckGenesis", Composite("frame_system::extensions::check_genesis::CheckGenesis", []), H256),
    (
        "CheckMortality",
        Composite(
            "frame_system::extensions::check_mortality::CheckMortality", [Field(None, ERA, "Era")]
        ),
        H256,
    ),
    (
        "CheckNonce",
        Composite(
            "frame_system::extensions::check_nonce::CheckNonce",
            [Field(None, Compact(U32), "T::Nonce")],
        ),
        UNIT,
    ),
    ("CheckWeight", Composite("frame_system::extensions::check_weight::CheckWeight", []), UNIT),
    (
        "ChargeTransactionPayment",
        Composite(
            "pallet_transaction_payment::ChargeTransactionPayment",
            [Field(None, Compact(U128), "BalanceOf<T>")],
        ),
        UNIT,
    ),
]
EXTRA = Tuple(*(e for _, e, _ in SIGNED_EXTENSIONS))
UNCHECKED_EXTRINSIC = Composite(
    "sp_runtime::generic::unchecked_extrinsic::UncheckedExtrinsic",
    [Field(None, BYTES)],
    params=[
        ("Address", MULTI_ADDRESS),
        ("Call", RUNTIME_CALL),
        ("Signature", MULTI_SIGNATURE),
        ("Extra", EXTRA),
    ],
)
RUNTIME = Composite("node_runtime::Runtime", [])
