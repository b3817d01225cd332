"""Codec: tagged-union round trips (property test) and clear errors for bad input."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel_actors import Codec, CodecError


class Quote(msgspec.Struct, frozen=True, tag="quote"):
    symbol: str
    bid: float
    ask: float
    size: int


class Order(msgspec.Struct, frozen=True, tag="order"):
    id: int
    side: str
    qty: int
    limit: float | None = None
    tags: tuple[str, ...] = ()


class Heartbeat(msgspec.Struct, frozen=True, tag="heartbeat"):
    pass


CODEC = Codec([Quote, Order, Heartbeat])

finite = st.floats(allow_nan=False, allow_infinity=False)
messages = st.one_of(
    st.builds(
        Quote,
        symbol=st.text(max_size=8),
        bid=finite,
        ask=finite,
        size=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    ),
    st.builds(
        Order,
        id=st.integers(min_value=-(2**63), max_value=2**63 - 1),
        side=st.sampled_from(["buy", "sell"]),
        qty=st.integers(min_value=0, max_value=10**9),
        limit=st.none() | finite,
        tags=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    ),
    st.just(Heartbeat()),
)


@settings(max_examples=150, deadline=None)
@given(message=messages, fmt=st.sampled_from(["json", "msgpack"]))
def test_round_trip_gives_back_an_equal_message_of_the_same_type(
    message: msgspec.Struct, fmt: str
) -> None:
    data = CODEC.encode(message, fmt)  # type: ignore[arg-type]
    back = CODEC.decode(data, fmt)  # type: ignore[arg-type]
    assert type(back) is type(message)
    assert back == message


def test_json_carries_the_tag_so_the_bytes_are_self_describing() -> None:
    assert CODEC.encode(Heartbeat()) == b'{"type":"heartbeat"}'
    assert CODEC.encode(Order(id=1, side="buy", qty=5)) == (
        b'{"type":"order","id":1,"side":"buy","qty":5,"limit":null,"tags":[]}'
    )
    assert CODEC.decode(b'{"type":"quote","symbol":"AAPL","bid":1.5,"ask":1.75,"size":3}') == (
        Quote(symbol="AAPL", bid=1.5, ask=1.75, size=3)
    )
    assert CODEC.tags == ("heartbeat", "order", "quote")


@pytest.mark.parametrize(
    ("data", "fmt", "expected"),
    [
        (b'{"type": "quote", "symbol": ', "json", "malformed json message"),
        (b"\xc1", "msgpack", "malformed msgpack message"),
        (
            b'{"type": "trade", "px": 1}',
            "json",
            "unknown message kind 'trade' (registered: heartbeat, order, quote)",
        ),
        (b'{"id": 1}', "json", "no 'type' field saying its kind"),
        (b'{"type": "order", "id": "x", "side": "buy", "qty": 1}', "json", "Expected `int`"),
        (b'{"type": "order", "id": 1}', "json", "missing required field `side`"),
        (b"[1, 2]", "json", "invalid json message"),
    ],
)
def test_malformed_or_unknown_input_raises_a_clear_codec_error(
    data: bytes, fmt: str, expected: str
) -> None:
    with pytest.raises(CodecError) as caught:
        CODEC.decode(data, fmt)  # type: ignore[arg-type]
    assert expected in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_unknown_kind_in_msgpack_is_named_too() -> None:
    data = msgspec.msgpack.encode({"type": "trade"})
    with pytest.raises(CodecError, match="unknown message kind 'trade'"):
        CODEC.decode(data, "msgpack")


def test_encoding_an_unregistered_type_is_refused() -> None:
    class Stray(msgspec.Struct, tag="stray"):
        pass

    with pytest.raises(CodecError, match="cannot encode Stray: not a registered message type"):
        CODEC.encode(Stray())


def test_a_value_the_format_cannot_hold_is_a_codec_error() -> None:
    huge = Quote(symbol="X", bid=1.0, ask=1.0, size=2**70)
    with pytest.raises(CodecError, match="cannot encode Quote as msgpack"):
        CODEC.encode(huge, "msgpack")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(CodecError, match="unknown format 'xml'"):
        CODEC.encode(Heartbeat(), "xml")  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="unknown format 'xml'"):
        CODEC.decode(b"{}", "xml")  # type: ignore[arg-type]


def test_registry_rejects_untagged_clashing_or_mixed_types() -> None:
    class Untagged(msgspec.Struct):
        pass

    class Clash(msgspec.Struct, tag="quote"):
        pass

    class OtherField(msgspec.Struct, tag="x", tag_field="kind"):
        pass

    with pytest.raises(CodecError, match="Untagged has no tag"):
        Codec([Untagged])
    with pytest.raises(CodecError, match="tag 'quote' is used by both Quote and Clash"):
        Codec([Quote, Clash])
    with pytest.raises(CodecError, match="uses tag field 'kind' but the registry uses 'type'"):
        Codec([Quote, OtherField])
    with pytest.raises(CodecError, match="not a msgspec Struct"):
        Codec([int])  # type: ignore[list-item]
    with pytest.raises(CodecError, match="at least one"):
        Codec([])


def test_the_kestrel_ast_round_trips_through_a_codec() -> None:
    from kestrel.lang import ast

    kinds = [
        cls
        for cls in vars(ast).values()
        if isinstance(cls, type)
        and issubclass(cls, msgspec.Struct)
        and cls.__struct_config__.tag is not None
    ]
    assert kinds, "the AST module defines tagged Structs"
    codec = Codec(kinds)
    assert len(codec.tags) == len(kinds)
