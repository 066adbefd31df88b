"""Inspection of a runtime blob (``:code``): decompression and the embedded version sections.

A Substrate node reads a runtime's version without executing it from two wasm custom sections
that ``sp-version`` embeds: ``runtime_version`` (SCALE ``RuntimeVersion``) and ``runtime_apis``
(12-byte entries: API id, u32 version). The state version of the genesis trie comes from there;
a runtime without the sections (old runtimes) is read as state version 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import zstandard

from ops_tools.chainspec.hashing import blake2_64
from ops_tools.chainspec.scale import Reader
from ops_tools.errors import InputError

ZSTD_PREFIX = bytes.fromhex("52bc537646db8e05")
# sc-executor's CODE_BLOB_BOMB_LIMIT: a compressed runtime may not inflate past this.
CODE_BLOB_BOMB_LIMIT = 50 * 1024 * 1024
WASM_MAGIC = b"\x00asm"
RUNTIME_API_INFO_SIZE = 12

# Names of well-known runtime APIs, so that inspection can show names rather than ids.
_KNOWN_APIS = [
    "Core",
    "Metadata",
    "BlockBuilder",
    "TaggedTransactionQueue",
    "OffchainWorkerApi",
    "AuraApi",
    "BabeApi",
    "GrandpaApi",
    "SessionKeys",
    "AccountNonceApi",
    "TransactionPaymentApi",
    "TransactionPaymentCallApi",
    "GenesisBuilder",
    "BeefyApi",
    "MmrApi",
    "AuthorityDiscoveryApi",
    "ParachainHost",
    "CollectCollationInfo",
    "BeefyMmrApi",
    "NominationPoolsApi",
    "StakingApi",
    "DryRunApi",
    "LocationToAccountApi",
    "XcmPaymentApi",
    "AuraUnincludedSegmentApi",
    "GetCoreSelectorApi",
    "RelayParentOffsetApi",
    "TrustedQueryApi",
    "ValidateStatement",
    "BeefyMmrApi",
    "Benchmark",
    "TryRuntime",
    "ContractsApi",
    "EthereumRuntimeRPCApi",
    "ConvertTransactionRuntimeApi",
    "AssetConversionApi",
    "FungiblesApi",
    "OperatorStakeApi",
]
API_NAMES: dict[str, str] = {"0x" + blake2_64(n.encode()).hex(): n for n in _KNOWN_APIS}
CORE_API_ID = blake2_64(b"Core")


@dataclass(frozen=True)
class RuntimeVersion:
    spec_name: str
    impl_name: str
    authoring_version: int
    spec_version: int
    impl_version: int
    transaction_version: int
    state_version: int
    apis: list[tuple[str, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["apis"] = [
            {"id": api_id, "name": API_NAMES.get(api_id), "version": version}
            for api_id, version in self.apis
        ]
        return data


def decompress_code(code: bytes, limit: int = CODE_BLOB_BOMB_LIMIT) -> bytes:
    """Inflate a zstd-compressed runtime blob (prefix ``0x52bc537646db8e05``), at most ``limit``."""
    if not code.startswith(ZSTD_PREFIX):
        return code
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(code[len(ZSTD_PREFIX) :])
        out = reader.read(limit + 1)
        # stream_reader.read may return less than asked before the end: keep reading.
        chunks = [out]
        total = len(out)
        while out and total <= limit:
            out = reader.read(limit + 1 - total)
            chunks.append(out)
            total += len(out)
    except zstandard.ZstdError as exc:
        raise InputError(
            f":code has the compressed-runtime prefix but is not valid zstd: {exc}"
        ) from exc
    if total > limit:
        raise InputError(
            f":code inflates past the bound of {limit} bytes (a compression bomb, or a runtime"
            " far larger than any real one); refusing to decompress it"
        )
    return b"".join(chunks)


def _leb128(data: bytes, pos: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise InputError(f":code is not a valid wasm module: truncated {what}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise InputError(f":code is not a valid wasm module: overlong {what}")


def custom_sections(wasm: bytes) -> dict[str, bytes]:
    """The custom sections of a wasm module by name (first of each name, as wasm parsers do)."""
    if not wasm.startswith(WASM_MAGIC):
        raise InputError(
            ":code is not a wasm module (no \\0asm magic, after decompression); the spec's"
            " runtime is corrupt or not a runtime"
        )
    if len(wasm) < 8 or wasm[4:8] != b"\x01\x00\x00\x00":
        raise InputError(":code is not a wasm module of version 1")
    sections: dict[str, bytes] = {}
    pos = 8
    while pos < len(wasm):
        section_id = wasm[pos]
        size, pos = _leb128(wasm, pos + 1, "section size")
        end = pos + size
        if end > len(wasm):
            raise InputError(
                f":code is not a valid wasm module: section {section_id} overruns the module"
            )
        if section_id == 0:
            name_len, name_pos = _leb128(wasm, pos, "custom section name")
            name_end = name_pos + name_len
            if name_end > end:
                raise InputError(
                    ":code is not a valid wasm module: custom section name overruns it"
                )
            name = wasm[name_pos:name_end].decode("utf-8", errors="replace")
            sections.setdefault(name, wasm[name_end:end])
        pos = end
    return sections


def _decode_apis(raw: bytes) -> list[tuple[str, int]]:
    if len(raw) % RUNTIME_API_INFO_SIZE:
        raise InputError(":code has a clipped runtime_apis section (length not a multiple of 12)")
    return [
        ("0x" + raw[i : i + 8].hex(), int.from_bytes(raw[i + 8 : i + 12], "little"))
        for i in range(0, len(raw), RUNTIME_API_INFO_SIZE)
    ]


def decode_runtime_version(section: bytes, apis: list[tuple[str, int]] | None) -> RuntimeVersion:
    """SCALE ``RuntimeVersion`` as ``sp_version::decode_with_version_hint`` reads it."""
    r = Reader(section, "runtime_version section")
    spec_name = r.string("spec_name")
    impl_name = r.string("impl_name")
    authoring_version = r.u32("authoring_version")
    spec_version = r.u32("spec_version")
    impl_version = r.u32("impl_version")
    embedded = [
        ("0x" + r.fixed(8, "api id").hex(), r.u32("api version")) for _ in range(r.compact("apis"))
    ]
    apis = apis if apis is not None else embedded
    core = next((v for i, v in apis if i == "0x" + CORE_API_ID.hex()), None)
    transaction_version = r.u32("transaction_version") if core is not None and core >= 3 else 1
    state_version = r.u8("state_version") if core is not None and core >= 4 else 0
    return RuntimeVersion(
        spec_name=spec_name,
        impl_name=impl_name,
        authoring_version=authoring_version,
        spec_version=spec_version,
        impl_version=impl_version,
        transaction_version=transaction_version,
        # A state version above 1 means "the latest", as RuntimeVersion::state_version() reads it.
        state_version=0 if state_version == 0 else 1,
        apis=apis,
    )


def read_runtime_version(code: bytes, limit: int = CODE_BLOB_BOMB_LIMIT) -> RuntimeVersion | None:
    """The version embedded in a runtime blob, or ``None`` when it carries no version section."""
    sections = custom_sections(decompress_code(code, limit))
    if "runtime_version" not in sections:
        return None
    apis = _decode_apis(sections["runtime_apis"]) if "runtime_apis" in sections else None
    return decode_runtime_version(sections["runtime_version"], apis)


def _leb128_encode(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _custom_section(name: str, payload: bytes) -> bytes:
    body = _leb128_encode(len(name)) + name.encode() + payload
    return b"\x00" + _leb128_encode(len(body)) + body


def encode_runtime_version(version: RuntimeVersion) -> bytes:
    """The ``runtime_version`` section payload; its ``apis`` are empty as sp-version emits them."""
    from ops_tools.chainspec.scale import encode_compact, encode_str

    return (
        encode_str(version.spec_name)
        + encode_str(version.impl_name)
        + version.authoring_version.to_bytes(4, "little")
        + version.spec_version.to_bytes(4, "little")
        + version.impl_version.to_bytes(4, "little")
        + encode_compact(0)
        + version.transaction_version.to_bytes(4, "little")
        + bytes((version.state_version,))
    )


def build_runtime_blob(
    version: RuntimeVersion,
    *,
    extra_sections: dict[str, bytes] | None = None,
    compress: bool = False,
) -> bytes:
    """A minimal valid wasm module that carries ``version`` the way a Substrate runtime does.

    The apis must include Core at version 4 or more for the state version to be read back.
    ``extra_sections`` lets a caller embed more payload (the development node embeds its runtime
    definition digest) so that different runtimes give different blobs and genesis hashes.
    """
    apis = b"".join(
        bytes.fromhex(i.removeprefix("0x")) + v.to_bytes(4, "little") for i, v in version.apis
    )
    module = WASM_MAGIC + b"\x01\x00\x00\x00"
    module += _custom_section("runtime_version", encode_runtime_version(version))
    module += _custom_section("runtime_apis", apis)
    for name, payload in sorted((extra_sections or {}).items()):
        module += _custom_section(name, payload)
    if compress:
        return ZSTD_PREFIX + zstandard.ZstdCompressor(level=19, write_content_size=True).compress(
            module
        )
    return module


def api(name: str, version: int) -> tuple[str, int]:
    """An ``(api id, version)`` pair for a named runtime API."""
    return "0x" + blake2_64(name.encode()).hex(), version
