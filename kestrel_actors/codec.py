"""`Codec`: msgspec Struct messages as tagged unions, in JSON and MessagePack.

A codec is built from a registry of message types. Every type must be a msgspec Struct
with a tag (`class Ping(msgspec.Struct, tag="ping")`), all with the same tag field and
distinct tags, so a message is self-describing and the same bytes decode back to the same
type on the other side of a socket. Encoding a type outside the registry, or decoding bytes
that are malformed, untagged, tagged with an unknown kind, or of the wrong shape, raises
`CodecError` with what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Union

import msgspec

from kestrel_actors.errors import ActorError

Format = Literal["json", "msgpack"]


class CodecError(ActorError, ValueError):
    """A message could not be encoded or decoded."""


class Codec:
    """Encoder/decoder for one registry of tagged msgspec Struct message types."""

    def __init__(self, types: Iterable[type[msgspec.Struct]]) -> None:
        registry: dict[str, type[msgspec.Struct]] = {}
        tag_field: str | None = None
        for cls in types:
            if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
                raise CodecError(f"{cls!r} is not a msgspec Struct type; messages must be Structs")
            config = cls.__struct_config__
            if config.tag is None or config.tag_field is None:
                raise CodecError(
                    f"message type {cls.__name__} has no tag; declare it as "
                    f"`class {cls.__name__}(msgspec.Struct, tag=...)`"
                )
            if tag_field is None:
                tag_field = config.tag_field
            elif config.tag_field != tag_field:
                raise CodecError(
                    f"message type {cls.__name__} uses tag field {config.tag_field!r} but the "
                    f"registry uses {tag_field!r}; every message type must use the same one"
                )
            tag = str(config.tag)
            other = registry.get(tag)
            if other is not None and other is not cls:
                raise CodecError(
                    f"tag {tag!r} is used by both {other.__name__} and {cls.__name__}; "
                    "tags must be unique"
                )
            registry[tag] = cls
        if not registry:
            raise CodecError("a codec needs at least one message type")
        self.tag_field: str = tag_field or "type"
        self._registry = dict(sorted(registry.items()))
        self._types = frozenset(registry.values())
        union: Any = Union[tuple(self._registry.values())]  # noqa: UP007
        self._json_enc = msgspec.json.Encoder()
        self._json_dec: msgspec.json.Decoder[Any] = msgspec.json.Decoder(union)
        self._mp_enc = msgspec.msgpack.Encoder()
        self._mp_dec: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(union)

    @property
    def tags(self) -> tuple[str, ...]:
        """Registered message kinds, sorted."""
        return tuple(self._registry)

    def type_for(self, tag: str) -> type[msgspec.Struct]:
        try:
            return self._registry[tag]
        except KeyError:
            raise CodecError(self._unknown(tag)) from None

    def encode(self, message: msgspec.Struct, format: Format = "json") -> bytes:
        """Bytes of `message` (its tag included) in `format`."""
        if type(message) not in self._types:
            raise CodecError(
                f"cannot encode {type(message).__name__}: not a registered message type "
                f"(registered: {', '.join(self.tags)})"
            )
        if format == "json":
            encoder: msgspec.json.Encoder | msgspec.msgpack.Encoder = self._json_enc
        elif format == "msgpack":
            encoder = self._mp_enc
        else:
            raise CodecError(f"unknown format {format!r}; use 'json' or 'msgpack'")
        try:
            return encoder.encode(message)
        except (msgspec.EncodeError, OverflowError, TypeError, ValueError) as exc:
            raise CodecError(
                f"cannot encode {type(message).__name__} as {format}: {exc}"
            ) from exc

    def decode(
        self, data: bytes | bytearray | memoryview, format: Format = "json"
    ) -> msgspec.Struct:
        """The message encoded in `data`; `CodecError` if it is not a valid registered message."""
        if format == "json":
            decoder: msgspec.json.Decoder[Any] | msgspec.msgpack.Decoder[Any] = self._json_dec
        elif format == "msgpack":
            decoder = self._mp_dec
        else:
            raise CodecError(f"unknown format {format!r}; use 'json' or 'msgpack'")
        try:
            message: msgspec.Struct = decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise CodecError(self._explain(str(exc), data, format)) from exc
        except msgspec.DecodeError as exc:
            raise CodecError(f"malformed {format} message: {exc}") from exc
        return message

    def _explain(self, detail: str, data: bytes | bytearray | memoryview, format: Format) -> str:
        if detail == f"Object missing required field `{self.tag_field}`":
            return (
                f"invalid {format} message: no {self.tag_field!r} field saying its kind "
                f"(one of: {', '.join(self.tags)})"
            )
        if detail.startswith("Invalid value ") and detail.endswith(f"at `$.{self.tag_field}`"):
            tag = detail[len("Invalid value ") :].rsplit(" - at ", 1)[0]
            return f"invalid {format} message: {self._unknown(tag.strip(chr(39)))}"
        return f"invalid {format} message: {detail}"

    def _unknown(self, tag: str) -> str:
        return f"unknown message kind {tag!r} (registered: {', '.join(self.tags)})"
