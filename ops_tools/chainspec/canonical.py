"""Canonical JSON bytes: the one serialisation of a chain spec that is compared and hashed."""

from __future__ import annotations

import json
from typing import Any


def _reject_floats(value: Any, path: str = "") -> None:
    if isinstance(value, float):
        raise ValueError(
            f"{path or '(top)'}: floats have no canonical form; chain specs use integers"
        )
    if isinstance(value, dict):
        for k, v in value.items():
            _reject_floats(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _reject_floats(v, f"{path}[{i}]")


def canonical_json(value: Any) -> bytes:
    """Sorted keys, two-space indent, UTF-8, LF line ends, one trailing newline."""
    _reject_floats(value)
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, separators=(",", ": "))
    return (text + "\n").encode("utf-8")
