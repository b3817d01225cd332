"""The control protocol: every line decodes to a typed request or a JSON-RPC error code."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kestrel.service.daemon.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    METHODS,
    PARSE_ERROR,
    HelloParams,
    Notification,
    ProtocolError,
    Response,
    SubmitParams,
    WaitParams,
    decode_request,
    encode,
    error,
    request,
)


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def code_of(raw: bytes) -> tuple[int, str]:
    with pytest.raises(ProtocolError) as info:
        decode_request(raw)
    return info.value.code, str(info.value)


def test_a_valid_request_decodes_to_typed_params() -> None:
    req, params = decode_request(line({"jsonrpc": "2.0", "id": 7, "method": "wait",
                                       "params": {"run": "r1", "timeout": 2.5}}))
    assert req.id == 7 and req.method == "wait"
    assert params == WaitParams("r1", 2.5)
    req, params = decode_request(line({"jsonrpc": "2.0", "id": "a", "method": "submit",
                                       "params": {"argv": ["--pace", "60"], "cwd": "/tmp"}}))
    assert params == SubmitParams(["--pace", "60"], "/tmp")


def test_the_client_encoder_round_trips_through_the_server_decoder() -> None:
    raw = encode(request("hello", 3, HelloParams(1, "test")))
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    req, params = decode_request(raw.strip())
    assert (req.id, req.method, params) == (3, "hello", HelloParams(1, "test"))


@pytest.mark.parametrize("raw", [b"not json", b"{", b"\xff\xfe", b'{"a": }'])
def test_garbage_is_a_parse_error(raw: bytes) -> None:
    assert code_of(raw)[0] == PARSE_ERROR


@pytest.mark.parametrize(
    "obj",
    [
        [1, 2, 3],
        "hello",
        {"id": 1, "method": "ping"},  # no jsonrpc
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": [1], "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": True},
    ],
)
def test_wrong_shapes_are_invalid_requests(obj: object) -> None:
    code, text = code_of(line(obj))
    assert code == INVALID_REQUEST
    assert "JSON-RPC 2.0" in text


def test_an_unknown_method_is_named_with_the_known_ones() -> None:
    code, text = code_of(line({"jsonrpc": "2.0", "id": 4, "method": "rm -rf"}))
    assert code == METHOD_NOT_FOUND
    assert "'rm -rf'" in text and "submit" in text


@pytest.mark.parametrize(
    ("method", "params", "names"),
    [
        ("wait", {"run": 5}, "run"),
        ("wait", {"run": "r", "timeout": "soon"}, "timeout"),
        ("submit", {"argv": "--pace 60", "cwd": "/"}, "argv"),
        ("show", {}, "run"),
        ("hello", {"protocol": 1, "bogus": 1}, "bogus"),
    ],
)
def test_bad_params_are_invalid_params_naming_the_field(method: str, params: dict[str, object], names: str) -> None:
    code, text = code_of(line({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    assert code == INVALID_PARAMS
    assert names in text


def test_the_request_id_survives_into_errors_when_it_can() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_request(line({"jsonrpc": "2.0", "id": 42, "method": "nope"}))
    assert info.value.request_id == 42


def test_responses_and_notifications_are_single_json_lines() -> None:
    ok = json.loads(encode(Response(1, result={"a": 1})))
    assert ok == {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}
    bad = json.loads(encode(error(2, INVALID_PARAMS, "bad")))
    assert bad == {"jsonrpc": "2.0", "id": 2, "error": {"code": INVALID_PARAMS, "message": "bad"}}
    note = json.loads(encode(Notification("event", {"kind": "turn"})))
    assert "id" not in note and note["method"] == "event"


def test_every_method_has_a_params_struct() -> None:
    assert set(METHODS) == {"hello", "ping", "submit", "runs", "show", "wait", "follow", "cancel", "export", "shutdown"}
    for kind in METHODS.values():
        assert issubclass(kind, msgspec.Struct)


@given(st.binary(max_size=300))
def test_any_bytes_decode_or_raise_a_protocol_error(raw: bytes) -> None:
    try:
        decode_request(raw)
    except ProtocolError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10))
def test_any_json_value_decodes_or_raises_a_protocol_error(value: object) -> None:
    try:
        decode_request(json.dumps(value).encode())
    except ProtocolError as exc:
        assert exc.code in (INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS)
