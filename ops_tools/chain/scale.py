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

scalecodec also builds a new class on every lookup of a composite type string (``Vec<T>``,
``Option<T>``, tuples, ``[T; N]``, inline structs) that its registry does not name: the metadata
alone asks for about 5,000, half of decoding it (0.1 CPU-s of every connection: each service
start, wallet call and ``ops-tools`` run), and every block and event asks again. Such a class is
its type string on top of one base class of the registry, so it is kept per configuration and
given again while the registry still has that base and still does not name the string itself.
"""

from __future__ import annotations

from typing import Any

from scalecodec.base import RuntimeConfigurationObject, ScaleBytes, ScaleType


class ScaleConfig(RuntimeConfigurationObject):
    """A runtime configuration whose objects (and their nested objects) use it and no other, and
    which builds each composite decoder class once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # type string (or id of an inline struct's dict) -> (the dict, implements_scale_info then
        # (without it, scalecodec converts the string first), the registry key the lookup
        # missed, the base's key, the base, the class)
        self._composites: dict[Any, tuple[Any, bool, str | None, str, type, type]] = {}
        super().__init__(*args, **kwargs)

    def create_scale_object(self, type_string: str, data: ScaleBytes | None = None,
                            **kwargs: Any) -> ScaleType:
        kwargs.setdefault("runtime_config", self)
        return super().create_scale_object(type_string, data, **kwargs)  # type: ignore[no-any-return]

    def get_decoder_class(self, type_string: str | dict[str, Any]) -> Any:
        types = self.type_registry.get("types", {})
        is_text = isinstance(type_string, str)
        # An inline struct's dict lives as long as the registry entry holding it; it is kept
        # with its class, so its id is not reused while the entry is here.
        key: Any = type_string if is_text else id(type_string)
        kept = self._composites.get(key)
        if kept is not None:
            _, scale_info, missed, base_key, base, cls = kept
            if (scale_info == self.implements_scale_info
                    and (missed is None or missed not in types) and types.get(base_key) is base):
                cls.runtime_config = self
                return cls
        cls = super().get_decoder_class(type_string)
        if cls is None:
            return None
        if not is_text:
            self._composites[key] = (type_string, self.implements_scale_info, None, "struct",
                                     cls.__bases__[0], cls)
            return cls
        scale_info = self.implements_scale_info
        text = type_string if scale_info else self.convert_type_string(type_string)
        missed = text.lower()
        base_key = self._composite_base(text)
        if missed not in types and base_key is not None and types.get(base_key) is cls.__bases__[0]:
            self._composites[key] = (type_string, scale_info, missed, base_key,
                                     cls.__bases__[0], cls)
        return cls

    def _composite_base(self, text: str) -> str | None:
        """The registry key of the base class scalecodec builds ``text`` on, if it is a
        composite (as ``RuntimeConfigurationObject.get_decoder_class`` parses it)."""
        if text.endswith(">"):
            parts = self.arrow_match_re.match(text)
            return parts.group(1).lower() if parts else None
        if text != "()" and text.startswith("(") and text.endswith(")"):
            return "tuple"
        if text.startswith("[") and text.endswith("]") and self.bracket_match_re.match(text):
            return "fixedlengtharray"
        return None
