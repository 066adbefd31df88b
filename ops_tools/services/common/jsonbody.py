"""The one strict reading of a JSON request body, for every service.

RFC 8259 leaves room that hostile clients use: Python's ``json`` accepts lone UTF-16 surrogates
(``"\\ud800"``, which have no UTF-8 form and fail later, deep in a handler), nesting until the
interpreter's recursion limit, integers of any size, ``NaN``, and duplicate keys (the last one
wins here and the first one in another reader, so two parties can read one body differently).
A body is refused with a :class:`JsonBodyError` naming the problem and where it is when:

- ``not_utf8``: it is not UTF-8;
- ``syntax``: it is not JSON (``NaN``, ``Infinity`` included);
- ``too_deep``: arrays and objects nest deeper than :data:`MAX_DEPTH`;
- ``number_out_of_range``: an integer is outside ``-2^63 .. 2^64-1`` or a number overflows a
  double;
- ``lone_surrogate``: a string or key holds an unpaired ``\\ud800``-``\\udfff`` escape;
- ``duplicate_key``: an object names a key twice.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_MAX_INT_DIGITS = 20
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class JsonBodyError(ValueError):
    def __init__(self, problem: str, message: str, path: str = "$") -> None:
        super().__init__(f"{problem} at {path}: {message}")
        self.problem = problem
        self.path = path
        self.message = message


class _Refused(Exception):
    """Raised from inside the parser's hooks; carries the error out of ``json``'s scanner."""

    def __init__(self, error: JsonBodyError) -> None:
        self.error = error


def _int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > _MAX_INT_DIGITS or not INT_MIN <= int(text) <= INT_MAX:
        shown = text if len(text) <= 24 else text[:24] + "..."
        raise _Refused(JsonBodyError("number_out_of_range", f"the integer {shown} does not fit"
                                     " in 64 bits; send it as a string"))
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(JsonBodyError("number_out_of_range", f"the number {text[:24]} overflows"
                                     " a 64-bit float"))
    return value


def _constant(name: str) -> Any:
    raise _Refused(JsonBodyError("syntax", f"{name} is not JSON"))


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(JsonBodyError("duplicate_key", f"the key {key[:64]!r} appears"
                                             " twice in one object; send it once"))
            seen.add(key)
    return obj


def _depth(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, counting brackets outside strings; before parsing,
    as ``json``'s recursive parser would otherwise run into the interpreter's recursion limit."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # the common case: not even that many brackets in all
    depth = 0
    # Strings can hold brackets: skip them (with their escapes) while counting.
    for match in _TOKEN.finditer(text):
        first = match.group()[0]
        if first in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise JsonBodyError("too_deep", f"arrays and objects nest deeper than"
                                    f" {MAX_DEPTH} levels; flatten the body",
                                    f"character {match.start()}")
        elif first in "]}":
            depth -= 1


def _surrogates(value: Any, path: str) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise JsonBodyError("lone_surrogate", "a string holds an unpaired UTF-16 surrogate"
                                " escape; send valid Unicode", path) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _surrogates(key, path)
            _surrogates(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _surrogates(item, f"{path}[{i}]")


def loads(raw: bytes) -> Any:
    """The value of a JSON body, or JsonBodyError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonBodyError("not_utf8", f"byte {exc.start} is not UTF-8; send UTF-8 JSON",
                            f"byte {exc.start}") from None
    _depth(text)
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_int,
                           parse_float=_float, parse_constant=_constant)
    except _Refused as refused:
        raise refused.error from None
    except json.JSONDecodeError as exc:
        raise JsonBodyError("syntax", f"{exc.msg} (line {exc.lineno}, column {exc.colno})",
                            f"character {exc.pos}") from None
    # Only a body with a surrogate escape can hold a lone one: skip the walk otherwise.
    if _SURROGATE_ESCAPE.search(raw):
        _surrogates(value, "$")
    return value
