"""The control protocol of `kestrel daemon`: newline-delimited JSON-RPC 2.0 shaped messages.

Every line is one UTF-8 JSON object, at most `MAX_LINE` bytes with its newline:
- a `Request` (`{"jsonrpc": "2.0", "id": 1, "method": "runs", "params": {...}}`);
- a `Response` with the same id and either `result` or `error` (`{code, message}`);
- a `Notification` (no id) the server streams before the response of `follow`.

A message longer than a line may be (a long run's `show`, `runs` or `export`) is sent as
`part` notifications (`Part`: the request's id, the part's index, whether it is the last, and
a slice of the message's line, base64): the receiver joins the slices in order and reads the
line they make (`Reassembler`); every line on the wire stays within `MAX_LINE`.

The first request of a connection must be `hello` with the client's `protocol` version; a
version the server does not speak is refused and the connection closed. The params and result
of each method are the Structs below (`METHODS`), decoded strictly: a wrong type or an unknown
field is an `INVALID_PARAMS` error naming it. Nothing here does I/O.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import msgspec

PROTOCOL_VERSION = 1
MAX_LINE = 1 << 20
"""The longest line either side sends or accepts (1 MiB, newline included)."""

# JSON-RPC 2.0 error codes (and the server's own, from -32000).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REFUSED = -32000
"""The request was well formed but cannot be done (unknown run, bad flags, ...)."""
TIMED_OUT = -32001


class Request(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    method: str
    id: int | str | None = None
    params: dict[str, Any] = {}


class ErrorBody(msgspec.Struct, frozen=True):
    code: int
    message: str


class Response(msgspec.Struct, frozen=True):
    """A success: the method's result."""

    id: int | str | None
    result: Any
    jsonrpc: str = "2.0"


class Failure(msgspec.Struct, frozen=True):
    """An error answer (`id` is None when the request's id could not be read)."""

    id: int | str | None
    error: ErrorBody
    jsonrpc: str = "2.0"


class Notification(msgspec.Struct, frozen=True):
    method: str
    params: Any
    jsonrpc: str = "2.0"


class Params(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every method's params."""


class HelloParams(Params, frozen=True):
    protocol: int
    client: str = ""


class HelloResult(msgspec.Struct, frozen=True):
    protocol: int
    server: str
    pid: int
    home: str


class NoParams(Params, frozen=True):
    pass


class SubmitParams(Params, frozen=True):
    """`argv` are `kestrel simulate` flags; relative paths in them are relative to `cwd`."""

    argv: list[str]
    cwd: str


class Submitted(msgspec.Struct, frozen=True):
    run: str
    pace: str


class RunParams(Params, frozen=True):
    run: str


class WaitParams(Params, frozen=True):
    run: str
    timeout: float | None = None


class RunInfo(msgspec.Struct, frozen=True):
    """One run as the store holds it."""

    run: str
    state: str
    """running | done | failed | cancelled"""
    argv: list[str]
    pace: str
    submitted: str
    ended: str | None = None
    reason: str | None = None
    turns: int = 0
    ledger_events: int = 0
    fills: int = 0
    resumed: int = 0
    summary: dict[str, Any] | None = None


class RunList(msgspec.Struct, frozen=True):
    runs: list[RunInfo]


class Exported(msgspec.Struct, frozen=True):
    """The exact bytes `kestrel simulate --ledger/--capture/--evidence` write (as text)."""

    run: str
    ledger: str
    capture: str
    evidence: str


class FollowItem(msgspec.Struct, frozen=True):
    """One committed record of a run, streamed by `follow` as a notification `event`:
    kind `turn` (a CapturedTurn), `ledger` (one LedgerEvent; `key` is `date/index`),
    `evidence` (an Evidence record) or `end` (`{state, reason, summary}`)."""

    run: str
    kind: str
    key: str
    body: Any


class Ok(msgspec.Struct, frozen=True):
    ok: bool = True
    message: str = ""


class Part(msgspec.Struct, frozen=True):
    """One slice of a message too long for a line (notification `part`)."""

    id: int | str | None
    index: int
    last: bool
    data: str


PART_BYTES = 512 * 1024
"""Bytes of a long line per part (its base64 and envelope stay well within `MAX_LINE`)."""
MAX_MESSAGE = 1 << 30
"""The longest message a receiver reassembles from parts."""


METHODS: dict[str, type[Params]] = {
    "hello": HelloParams,
    "ping": NoParams,
    "submit": SubmitParams,
    "runs": NoParams,
    "show": RunParams,
    "wait": WaitParams,
    "follow": RunParams,
    "cancel": RunParams,
    "export": RunParams,
    "shutdown": NoParams,
}

TERMINAL_STATES = ("done", "failed", "cancelled")

_encoder = msgspec.json.Encoder(order="deterministic")
_request = msgspec.json.Decoder(Request)


class ProtocolError(ValueError):
    """A line that is not a valid request; `code` is the JSON-RPC error code to answer."""

    def __init__(self, code: int, message: str, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


def decode_request(line: bytes) -> tuple[Request, Params]:
    """The request on `line` and its typed params (raises `ProtocolError`)."""
    if not line.strip():
        raise ProtocolError(INVALID_REQUEST, "empty line: send one JSON-RPC 2.0 request per line")
    try:
        raw = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise ProtocolError(PARSE_ERROR, f"not JSON: {exc}") from None
    except RecursionError:  # the decoder's depth limit (e.g. "[" * 100000)
        raise ProtocolError(PARSE_ERROR, "not JSON this daemon reads: nested too deeply") from None
    request_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(request_id, int | str):
        request_id = None
    try:
        request = msgspec.convert(raw, Request)
    except msgspec.ValidationError as exc:
        raise ProtocolError(
            INVALID_REQUEST,
            f"not a JSON-RPC 2.0 request ({exc}): send {{\"jsonrpc\": \"2.0\", \"id\": N, \"method\": M, \"params\": {{...}}}}",
            request_id,
        ) from None
    kind = METHODS.get(request.method)
    if kind is None:
        raise ProtocolError(
            METHOD_NOT_FOUND, f"unknown method {request.method!r}: use one of {', '.join(METHODS)}", request.id
        )
    try:
        params = msgspec.convert(request.params, kind)
    except msgspec.ValidationError as exc:
        raise ProtocolError(INVALID_PARAMS, f"{request.method}: bad params: {exc}", request.id) from None
    return request, params


def encode(message: Response | Failure | Notification | Request) -> bytes:
    """One line: the message as JSON plus a newline."""
    return _encoder.encode(message) + b"\n"


def encode_lines(message: Response | Failure | Notification, request_id: int | str | None) -> list[bytes]:
    """`message` as the lines to send: itself when it fits `MAX_LINE`, else its `part`s."""
    line = encode(message)
    if len(line) <= MAX_LINE:
        return [line]
    n = -(-len(line) // PART_BYTES)
    return [
        encode(Notification("part", Part(request_id, k, k == n - 1,
                                         base64.b64encode(line[k * PART_BYTES:(k + 1) * PART_BYTES]).decode())))
        for k in range(n)
    ]


class Reassembler:
    """Joins `part` notifications back into the line they carry."""

    def __init__(self, max_bytes: int = MAX_MESSAGE) -> None:
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._size = 0

    def take(self, params: Any) -> bytes | None:
        """Take one part's params; the whole line once the last part is in, else None.
        Raises ValueError for parts out of order or a message over `max_bytes`."""
        part = msgspec.convert(params, Part)
        if part.index != len(self._parts):
            raise ValueError(f"part {part.index} of a long message arrived out of order")
        chunk = base64.b64decode(part.data)
        self._size += len(chunk)
        if self._size > self.max_bytes:
            raise ValueError(f"a message over {self.max_bytes} bytes")
        self._parts.append(chunk)
        if not part.last:
            return None
        line, self._parts, self._size = b"".join(self._parts), [], 0
        return line


def request(method: str, request_id: int, params: Params | None = None) -> Request:
    body = {} if params is None else msgspec.to_builtins(params)
    return Request("2.0", method, request_id, body)


def error(request_id: int | str | None, code: int, message: str) -> Failure:
    return Failure(request_id, ErrorBody(code, message))


__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_LINE",
    "METHODS",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "REFUSED",
    "TERMINAL_STATES",
    "TIMED_OUT",
    "ErrorBody",
    "Exported",
    "Failure",
    "FollowItem",
    "HelloParams",
    "HelloResult",
    "NoParams",
    "Notification",
    "Ok",
    "PART_BYTES",
    "Params",
    "Part",
    "ProtocolError",
    "Reassembler",
    "Request",
    "Response",
    "RunInfo",
    "RunList",
    "RunParams",
    "SubmitParams",
    "Submitted",
    "WaitParams",
    "decode_request",
    "encode",
    "encode_lines",
    "error",
    "request",
]
