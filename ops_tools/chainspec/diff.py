"""What changed between two raw chain specs, by storage item, as a maintainer reads it before a
reset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ops_tools.chainspec.genesis import compute_genesis
from ops_tools.chainspec.spec import CODE_KEY, LoadedSpec, raw_storage
from ops_tools.chainspec.storage_names import name_key

_IDENTITY_FIELDS = ("name", "id", "protocolId", "chainType", "bootNodes", "properties")


@dataclass
class SpecDiff:
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    runtime: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    genesis_hash: tuple[str, str] = ("", "")
    # item name -> {"added": [...], "removed": [...], "changed": [...]} of key remainders (hex)
    items: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return not (self.fields or self.runtime or self.items)

    def to_json(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "genesis_hash": {"a": self.genesis_hash[0], "b": self.genesis_hash[1]},
            "fields": {k: {"a": a, "b": b} for k, (a, b) in self.fields.items()},
            "runtime": {k: {"a": a, "b": b} for k, (a, b) in self.runtime.items()},
            "storage": self.items,
        }


def diff_specs(a: LoadedSpec, b: LoadedSpec) -> SpecDiff:
    out = SpecDiff()
    for name in _IDENTITY_FIELDS:
        if a.data.get(name) != b.data.get(name):
            out.fields[name] = (a.data.get(name), b.data.get(name))
    ga, gb = compute_genesis(a), compute_genesis(b)
    out.genesis_hash = ("0x" + ga.genesis_hash.hex(), "0x" + gb.genesis_hash.hex())
    ra = ga.runtime.to_json() if ga.runtime else {}
    rb = gb.runtime.to_json() if gb.runtime else {}
    for key in sorted(set(ra) | set(rb)):
        if ra.get(key) != rb.get(key):
            out.runtime[key] = (ra.get(key), rb.get(key))
    if ga.code_blake2_256 != gb.code_blake2_256:
        out.runtime["code_blake2_256"] = (
            "0x" + (ga.code_blake2_256 or b"").hex(),
            "0x" + (gb.code_blake2_256 or b"").hex(),
        )
    sa, sb = raw_storage(a).top, raw_storage(b).top
    for key in sorted(set(sa) | set(sb)):
        if key == CODE_KEY or sa.get(key) == sb.get(key):
            continue  # the runtime is reported above, by version and hash
        change = "added" if key not in sa else "removed" if key not in sb else "changed"
        item, rest = name_key(key)
        out.items.setdefault(item, {"added": [], "removed": [], "changed": []})[change].append(rest)
    return out


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path at which two decoded JSON values differ (``None`` when equal)."""
    if type(a) is not type(b):
        return path or "(top level)"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return sub
            found = first_difference(a[key], b[key], sub)
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return f"{path}[{min(len(a), len(b))}]" if len(a) != len(b) else None
    return None if a == b else (path or "(top level)")


def describe_path(path: str) -> str:
    """A path inside ``genesis.raw.top`` named by storage item where the key is known."""
    prefix = "genesis.raw.top."
    if path.startswith(prefix):
        key_hex = path[len(prefix) :]
        try:
            item, _ = name_key(bytes.fromhex(key_hex.removeprefix("0x")))
        except ValueError:
            return path
        return f"{path} ({item})"
    return path
