"""SCALE pieces, cross-checked with scalecodec (an independent implementation)."""

from __future__ import annotations

import pytest
from scalecodec.base import RuntimeConfiguration, ScaleBytes
from scalecodec.type_registry import load_type_registry_preset

from ops_tools.chainspec.header import DIGEST_PRE_RUNTIME, DIGEST_SEAL, DigestItem, Header
from ops_tools.chainspec.scale import Reader, encode_compact
from ops_tools.errors import InputError

CASES = [0, 1, 63, 64, 16383, 16384, 2**30 - 1, 2**30, 2**32, 2**64 - 1, 2**128 - 1]


@pytest.fixture(scope="module")
def scale_config():
    config = RuntimeConfiguration()
    config.update_type_registry(load_type_registry_preset("legacy"))
    return config


@pytest.mark.parametrize("n", CASES)
def test_compact_matches_scalecodec(scale_config, n):
    ours = encode_compact(n)
    theirs = scale_config.create_scale_object("Compact<u128>").encode(n)
    assert ours == bytes(theirs.data)
    assert Reader(ours).compact() == n


def test_header_round_trip_and_scalecodec_agrees_on_hash_input(scale_config):
    header = Header(
        bytes(range(32)),
        1234,
        bytes([1]) * 32,
        bytes([2]) * 32,
        (
            DigestItem(DIGEST_PRE_RUNTIME, b"aura", b"\x05" * 8),
            DigestItem(DIGEST_SEAL, b"aura", b"\x09" * 64),
        ),
    )
    encoded = header.encode()
    assert Header.decode(encoded) == header
    obj = scale_config.create_scale_object("Header", ScaleBytes(encoded))
    decoded = obj.decode()
    assert decoded["number"] == 1234
    assert decoded["parent_hash"] == "0x" + bytes(range(32)).hex()
    assert decoded["extrinsics_root"] == "0x" + "02" * 32
    logs = decoded["digest"]["logs"]
    assert logs[0]["PreRuntime"]["engine"] == "aura"
    assert logs[1]["Seal"]["data"] == "0x" + "09" * 64


def test_truncated_input_names_the_field():
    with pytest.raises(InputError, match="spec_version"):
        Reader(b"\x01\x02", "runtime_version section").u32("spec_version")
