"""``ScaleConfig`` builds each composite decoder class once, and builds it again when the registry
it was built from changes: the development runtime's metadata decodes to what scalecodec's own
configuration decodes, and a composite's class follows a new base, or the registry naming the
type string itself (pure, no process)."""

from __future__ import annotations

import functools

from scalecodec.base import RuntimeConfigurationObject, ScaleBytes
from scalecodec.type_registry import load_type_registry_preset

from ops_tools.chain.scale import ScaleConfig
from ops_tools.devnode.runtime.metadata import encode_metadata

CONSTANTS = {"slot_duration": 1000, "min_stake": 10**12, "epoch_length": 10,
             "max_heartbeat_epoch_advance": 2}


@functools.cache
def _metadata() -> bytes:
    return encode_metadata(CONSTANTS)


def _loaded(config: RuntimeConfigurationObject) -> RuntimeConfigurationObject:
    config.update_type_registry(load_type_registry_preset("core"))
    metadata = config.create_scale_object("MetadataVersioned", data=ScaleBytes(_metadata()))
    metadata.decode()
    config.add_portable_registry(metadata)
    return config


def test_the_metadata_and_a_runtime_type_decode_as_scalecodecs_own_configuration_does():
    ours, theirs = ScaleConfig(), RuntimeConfigurationObject()
    values = []
    for config in (ours, theirs):
        config.update_type_registry(load_type_registry_preset("core"))
        metadata = config.create_scale_object("MetadataVersioned", data=ScaleBytes(_metadata()))
        values.append(metadata.decode())
        config.add_portable_registry(metadata)
    assert values[0] == values[1]
    # A composite over the runtime's own types, both ways.
    value = [(1, "0x" + "ab" * 32), (2, "0x" + "cd" * 32)]
    encoded = [c.create_scale_object("Vec<(u32, [u8; 32])>").encode(value) for c in (ours, theirs)]
    assert encoded[0] == encoded[1]
    decoded = ours.create_scale_object("Vec<(u32, [u8; 32])>", data=encoded[0]).decode()
    assert [tuple(item) for item in decoded] == value


def test_a_composite_is_built_once_per_configuration_and_keeps_its_own():
    one, two = _loaded(ScaleConfig()), _loaded(ScaleConfig())
    for type_string in ("Vec<u32>", "Option<(u8, u16)>", "(u32, bool)", "[u16; 3]"):
        first = one.get_decoder_class(type_string)
        assert one.get_decoder_class(type_string) is first, type_string
        other = two.get_decoder_class(type_string)
        assert other is not first, type_string
        assert first.runtime_config is one and other.runtime_config is two, type_string
    # scalecodec's own builds another class at every lookup.
    theirs = _loaded(RuntimeConfigurationObject())
    assert theirs.get_decoder_class("Vec<u32>") is not theirs.get_decoder_class("Vec<u32>")


def test_a_composite_follows_a_new_base_and_a_registry_that_names_it():
    config = _loaded(ScaleConfig())
    before = config.get_decoder_class("Vec<u32>")
    old_base = config.type_registry["types"]["vec"]
    new_base = type("Vec", (old_base,), {})
    config.type_registry["types"]["vec"] = new_base
    after = config.get_decoder_class("Vec<u32>")
    assert after is not before and after.__bases__ == (new_base,)
    assert after.sub_type == "u32"
    # The registry names the string itself: its entry is the answer from then on.
    named = type("Numbers", (old_base,), {"sub_type": "u32"})
    config.type_registry["types"]["vec<u32>"] = named
    assert config.get_decoder_class("Vec<u32>") is named
    del config.type_registry["types"]["vec<u32>"]
    assert config.get_decoder_class("Vec<u32>").__bases__ == (new_base,)


def test_an_inline_struct_is_built_once_while_its_base_stays():
    config = _loaded(ScaleConfig())
    fields = {"a": "u8", "b": "u32"}
    first = config.get_decoder_class(fields)
    assert config.get_decoder_class(fields) is first
    assert config.get_decoder_class(dict(fields)) is not first  # another dict, another entry
    data = config.create_scale_object("u8").encode(7) + config.create_scale_object("u32").encode(9)
    assert first(data=data, runtime_config=config).decode() == {"a": 7, "b": 9}
    config.type_registry["types"]["struct"] = type("Struct", (first.__bases__[0],), {})
    assert config.get_decoder_class(fields) is not first
