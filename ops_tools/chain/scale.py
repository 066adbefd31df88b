"""The SCALE codec's runtime configuration, with the objects it makes bound to it.

scalecodec attaches a configuration to a decoder *class* whenever that configuration looks the
class up, and the built-in classes (``GenericCall``, ``GenericExtrinsic``, ...) are shared by every
configuration in the process. An object made without an explicit configuration reads the class's
at every step of its encoding or decoding: so a call composed by one client can be encoded with
the types of another client, another network or another spec version, whichever looked the class
up last. Two clients on two threads (the faucet's submitter and its follower, the gateway's
reader and its settler, the indexer's decoding while a new spec version's metadata loads) then
fail at random with ``Decoder class for "scale_info::N" not found`` while one of them rebuilds its
registry, or worse, encode with the wrong types. Every object made here keeps the configuration
that made it, and the objects it makes in turn are made by that configuration.
"""

from __future__ import annotations

from typing import Any

from scalecodec.base import RuntimeConfigurationObject, ScaleBytes, ScaleType


class ScaleConfig(RuntimeConfigurationObject):
    """A runtime configuration whose objects (and their nested objects) use it and no other."""

    def create_scale_object(self, type_string: str, data: ScaleBytes | None = None,
                            **kwargs: Any) -> ScaleType:
        kwargs.setdefault("runtime_config", self)
        return super().create_scale_object(type_string, data, **kwargs)  # type: ignore[no-any-return]
