"""The strict JSON body parser (pure): each refusal at its exact boundary, and what it accepts."""

from __future__ import annotations

import json

import pytest

from ops_tools.services.common.jsonbody import MAX_DEPTH, JsonBodyError, loads


def nested(depth: int, inner: bytes = b"") -> bytes:
    return b"[" * depth + inner + b"]" * depth


def refusal(raw: bytes) -> JsonBodyError:
    with pytest.raises(JsonBodyError) as caught:
        loads(raw)
    return caught.value


def test_nesting_up_to_the_limit_is_accepted_and_one_more_is_not():
    assert loads(nested(MAX_DEPTH)) == json.loads(nested(MAX_DEPTH))
    assert refusal(nested(MAX_DEPTH + 1)).problem == "too_deep"
    assert refusal(b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1)).problem \
        == "too_deep"
    # A million levels: refused before the parser recurses, not a RecursionError.
    assert refusal(nested(1_000_000)).problem == "too_deep"


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"s": "[" * 500 + '\\" {{{', "t": ["]" * 300]}).encode()
    assert loads(text)["s"].startswith("[[[")


@pytest.mark.parametrize("number, ok", [
    (2**64 - 1, True), (2**64, False), (-(2**63), True), (-(2**63) - 1, False),
])
def test_integers_are_bounded_to_64_bits(number, ok):
    raw = b'{"n": %d}' % number
    if ok:
        assert loads(raw) == {"n": number}
    else:
        error = refusal(raw)
        assert error.problem == "number_out_of_range" and str(number) in error.message


def test_a_number_of_a_million_digits_is_refused_without_converting_it():
    assert refusal(b"1" * 1_000_000).problem == "number_out_of_range"


def test_floats_overflowing_a_double_and_nan_are_refused():
    assert loads(b"[1.5e300, -2.5]") == [1.5e300, -2.5]
    assert refusal(b"[1e400]").problem == "number_out_of_range"
    assert refusal(b"[-1e400]").problem == "number_out_of_range"
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        assert refusal(b"[" + constant + b"]").problem == "syntax"


def test_lone_surrogates_are_refused_with_their_path_and_pairs_are_accepted():
    assert loads(b'{"e": "\\ud83d\\ude00"}') == {"e": "\U0001f600"}
    error = refusal(b'{"a": [1, {"b": "x\\ud800y"}]}')
    assert error.problem == "lone_surrogate" and error.path == "$.a[1].b"
    assert refusal(b'{"\\uDFFF": 1}').problem == "lone_surrogate"
    assert refusal(b'["\\ude00\\ud83d"]').problem == "lone_surrogate"  # reversed pair
    # An escaped backslash followed by "ud800" is text, not an escape.
    assert loads(b'["\\\\ud800"]') == ["\\ud800"]


def test_duplicate_keys_are_refused_at_any_depth():
    assert refusal(b'{"model": "a", "model": "b"}').problem == "duplicate_key"
    error = refusal(b'{"x": [{"k": 1, "j": 2, "k": 3}]}')
    assert error.problem == "duplicate_key" and "'k'" in error.message
    assert loads(b'{"k": {"k": 1}}') == {"k": {"k": 1}}


def test_bytes_that_are_not_utf8_and_plain_syntax_errors():
    assert refusal(b'{"a": "\xc3"}').problem == "not_utf8"
    # CESU-8 (a surrogate encoded as UTF-8 bytes) is not UTF-8 either.
    assert refusal(b'["\xed\xa0\x80"]').problem == "not_utf8"
    error = refusal(b'{"a": }')
    assert error.problem == "syntax" and "line 1" in error.message
