"""A small SCALE type system: each type encodes, decodes and describes itself for scale-info.

The runtime's calls, events, errors and storage values are declared once with these types; the
same objects execute (encode/decode) and produce the metadata's PortableRegistry, so the node
and its clients can never disagree about a layout.

Values: ints, bools, ``bytes`` (for ``[u8; N]`` and ``Vec<u8>``), dicts (named fields), tuples
(unnamed fields), and ``(variant_name, payload)`` pairs for enums (payload ``None`` without
fields; a lone unnamed field is given unwrapped). A composite with one unnamed field (a
newtype such as ``AccountId32``) is its inner value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ops_tools.chainspec.scale import Reader, encode_compact
from ops_tools.errors import OpsError


class DecodeError(ValueError):
    """Bytes that do not decode as the expected type."""


class Type:
    """Base of all types. ``path`` names the Rust type for scale-info (clients key on it)."""

    path: tuple[str, ...] = ()
    params: tuple[tuple[str, Type | None], ...] = ()

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    def decode(self, r: Reader) -> Any:
        raise NotImplementedError

    def type_def(self, reg: Registry) -> dict[str, Any]:
        raise NotImplementedError

    def decode_all(self, data: bytes) -> Any:
        r = Reader(data, "SCALE value")
        try:
            value = self.decode(r)
        except (DecodeError, OpsError, ValueError, KeyError, IndexError) as exc:
            raise DecodeError(str(exc)) from None
        if r.remaining():
            raise DecodeError(f"{r.remaining()} trailing bytes after the value")
        return value


class Prim(Type):
    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size

    def encode(self, value: Any) -> bytes:
        if self.name == "bool":
            return b"\x01" if value else b"\x00"
        if not isinstance(value, int) or value < 0 or value >= 1 << (8 * self.size):
            raise DecodeError(f"{value!r} does not fit {self.name}")
        return int(value).to_bytes(self.size, "little")

    def decode(self, r: Reader) -> Any:
        raw = r.fixed(self.size, self.name)
        if self.name == "bool":
            if raw[0] > 1:
                raise DecodeError(f"bool byte {raw[0]}")
            return raw[0] == 1
        return int.from_bytes(raw, "little")

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"primitive": self.name}


U8, U16, U32, U64, U128 = (
    Prim("u8", 1),
    Prim("u16", 2),
    Prim("u32", 4),
    Prim("u64", 8),
    Prim("u128", 16),
)
BOOL = Prim("bool", 1)


class Compact(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner

    def encode(self, value: Any) -> bytes:
        return encode_compact(value)

    def decode(self, r: Reader) -> Any:
        return r.compact()

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"compact": {"type": reg.id(self.inner)}}


class Seq(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner

    def encode(self, value: Any) -> bytes:
        if self.inner is U8:
            return encode_compact(len(value)) + bytes(value)
        return encode_compact(len(value)) + b"".join(self.inner.encode(v) for v in value)

    def decode(self, r: Reader) -> Any:
        n = r.compact("sequence length")
        if self.inner is U8:
            return r.fixed(n, "bytes")
        if n > r.remaining():
            raise DecodeError(f"sequence of {n} items longer than the data")
        return [self.inner.decode(r) for _ in range(n)]

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"sequence": {"type": reg.id(self.inner)}}


class Array(Type):
    def __init__(self, length: int, inner: Type) -> None:
        self.length, self.inner = length, inner

    def encode(self, value: Any) -> bytes:
        if self.inner is U8:
            if len(value) != self.length:
                raise DecodeError(f"expected {self.length} bytes, got {len(value)}")
            return bytes(value)
        return b"".join(self.inner.encode(v) for v in value)

    def decode(self, r: Reader) -> Any:
        if self.inner is U8:
            return r.fixed(self.length, f"[u8; {self.length}]")
        return [self.inner.decode(r) for _ in range(self.length)]

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"array": {"len": self.length, "type": reg.id(self.inner)}}


class Str(Type):
    def encode(self, value: Any) -> bytes:
        raw = value.encode("utf-8")
        return encode_compact(len(raw)) + raw

    def decode(self, r: Reader) -> Any:
        n = r.compact("string length")
        try:
            return r.fixed(n, "str").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"str: {exc}") from None

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"primitive": "str"}


STR = Str()


class Option(Type):
    """``Option<T>``: scale-info describes it as the enum ``None | Some(T)``."""

    path = ("Option",)

    def __init__(self, inner: Type) -> None:
        self.inner = inner
        self.params = (("T", inner),)

    def encode(self, value: Any) -> bytes:
        return b"\x00" if value is None else b"\x01" + self.inner.encode(value)

    def decode(self, r: Reader) -> Any:
        tag = r.u8("option tag")
        if tag > 1:
            raise DecodeError(f"Option tag {tag}")
        return self.inner.decode(r) if tag else None

    def type_def(self, reg: Registry) -> dict[str, Any]:
        some = {"name": None, "type": reg.id(self.inner), "typeName": None, "docs": []}
        return {
            "variant": {
                "variants": [
                    {"name": "None", "fields": [], "index": 0, "docs": []},
                    {"name": "Some", "fields": [some], "index": 1, "docs": []},
                ]
            }
        }


class Tuple(Type):
    def __init__(self, *items: Type) -> None:
        self.items = items

    def encode(self, value: Any) -> bytes:
        return b"".join(t.encode(v) for t, v in zip(self.items, value, strict=True))

    def decode(self, r: Reader) -> Any:
        return tuple(t.decode(r) for t in self.items)

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"tuple": [reg.id(t) for t in self.items]}


UNIT = Tuple()


@dataclass(frozen=True)
class Field:
    name: str | None
    type: Type
    type_name: str | None = None


def _encode_fields(fields: Sequence[Field], value: Any) -> bytes:
    if not fields:
        return b""
    if fields[0].name is None:
        if len(fields) == 1:
            return fields[0].type.encode(value)
        return b"".join(f.type.encode(v) for f, v in zip(fields, value, strict=True))
    return b"".join(f.type.encode(value[f.name]) for f in fields)


def _decode_fields(fields: Sequence[Field], r: Reader) -> Any:
    if not fields:
        return None
    if fields[0].name is None:
        if len(fields) == 1:
            return fields[0].type.decode(r)
        return tuple(f.type.decode(r) for f in fields)
    return {f.name: f.type.decode(r) for f in fields}


def _fields_def(fields: Sequence[Field], reg: Registry) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "type": reg.id(f.type), "typeName": f.type_name, "docs": []}
        for f in fields
    ]


class Composite(Type):
    def __init__(
        self, path: str, fields: Sequence[Field], params: Sequence[tuple[str, Type | None]] = ()
    ) -> None:
        self.path = tuple(path.split("::")) if path else ()
        self.fields = list(fields)
        self.params = tuple(params)

    def encode(self, value: Any) -> bytes:
        return _encode_fields(self.fields, value)

    def decode(self, r: Reader) -> Any:
        value = _decode_fields(self.fields, r)
        return {} if value is None else value

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {"composite": {"fields": _fields_def(self.fields, reg)}}


@dataclass(frozen=True)
class Variant:
    index: int
    name: str
    fields: tuple[Field, ...] = ()
    docs: tuple[str, ...] = ()


class Enum(Type):
    def __init__(
        self,
        path: str,
        variants: Sequence[Variant] = (),
        params: Sequence[tuple[str, Type | None]] = (),
    ) -> None:
        self.path = tuple(path.split("::")) if path else ()
        self.params = tuple(params)
        self.set_variants(variants)

    def set_variants(self, variants: Sequence[Variant]) -> None:
        """Variants may be set after construction so that an enum can contain itself (calls)."""
        self.variants = list(variants)
        self.by_name = {v.name: v for v in self.variants}
        self.by_index = {v.index: v for v in self.variants}

    def encode(self, value: Any) -> bytes:
        name, payload = value if isinstance(value, tuple) else (value, None)
        variant = self.by_name.get(name)
        if variant is None:
            raise DecodeError(f"{'::'.join(self.path)} has no variant {name!r}")
        return bytes((variant.index,)) + _encode_fields(variant.fields, payload)

    def decode(self, r: Reader) -> Any:
        index = r.u8("variant index")
        variant = self.by_index.get(index)
        if variant is None:
            raise DecodeError(f"{'::'.join(self.path)} has no variant at index {index}")
        return variant.name, _decode_fields(variant.fields, r)

    def type_def(self, reg: Registry) -> dict[str, Any]:
        return {
            "variant": {
                "variants": [
                    {
                        "name": v.name,
                        "fields": _fields_def(v.fields, reg),
                        "index": v.index,
                        "docs": list(v.docs),
                    }
                    for v in self.variants
                ]
            }
        }


def unit_enum(path: str, names: Sequence[str]) -> Enum:
    return Enum(path, [Variant(i, n) for i, n in enumerate(names)])


class Registry:
    """scale-info's PortableRegistry: ids handed out in registration order.

    An id is reserved before a type's children are registered, so recursive types (a call that
    holds a call, as ``Sudo::sudo`` does) refer to themselves without looping.
    """

    def __init__(self) -> None:
        self._ids: dict[int, int] = {}
        self._entries: list[dict[str, Any] | None] = []

    def id(self, t: Type) -> int:
        key = id(t)
        if key in self._ids:
            return self._ids[key]
        type_id = len(self._entries)
        self._ids[key] = type_id
        self._entries.append(None)
        params = [{"name": n, "type": self.id(p) if p is not None else None} for n, p in t.params]
        self._entries[type_id] = {
            "id": type_id,
            "type": {"path": list(t.path), "params": params, "def": t.type_def(self), "docs": []},
        }
        return type_id

    def portable(self) -> list[dict[str, Any]]:
        return [e for e in self._entries if e is not None]
