"""Captured turns: the replay input, as msgspec JSON lines.

The first line is a `CaptureHeader` naming the data and the session (symbol, date, schedule,
guard, agent id) so a replay needs no other flags; every further line is one `CapturedTurn`
(ordinal, terminal turn, agent id). Never recorded: the profile, the backend, the run's
timestamp or anything else that differs between equivalent runs, so a `balanced` run, an
unflagged run and runs on asyncio and trio capture byte-identical files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from kestrel.session.protocol import AgentTurn

CAPTURE_FORMAT = "kestrel-capture/1"


class CaptureHeader(msgspec.Struct, frozen=True, tag="header", tag_field="record"):
    data: str
    symbol: str
    dates: tuple[str, ...]
    schedule: tuple[str, ...]
    guard_s: int
    agent: str
    format: str = CAPTURE_FORMAT


class CapturedTurn(msgspec.Struct, frozen=True, tag="turn", tag_field="record"):
    date: str
    ordinal: str
    turn: AgentTurn
    agent: str


CaptureLine = CaptureHeader | CapturedTurn

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(CaptureLine)


class CaptureError(ValueError):
    """A capture file that cannot be read back (with the line that failed)."""


def encode_capture(header: CaptureHeader, turns: Iterable[CapturedTurn]) -> bytes:
    lines = [_encoder.encode(header)] + [_encoder.encode(t) for t in turns]
    return b"\n".join(lines) + b"\n"


def decode_capture(data: bytes, *, source: str = "capture") -> tuple[CaptureHeader, list[CapturedTurn]]:
    header: CaptureHeader | None = None
    turns: list[CapturedTurn] = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            rec = _decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise CaptureError(f"{source}:{n}: not a capture record: {exc}") from None
        if isinstance(rec, CaptureHeader):
            if header is not None or turns:
                raise CaptureError(f"{source}:{n}: the header must be the first line, once")
            if rec.format != CAPTURE_FORMAT:
                raise CaptureError(
                    f"{source}:{n}: unsupported capture format {rec.format!r} "
                    f"(expected {CAPTURE_FORMAT!r})"
                )
            header = rec
        else:
            if header is None:
                raise CaptureError(f"{source}:{n}: a capture starts with its header line")
            turns.append(rec)
    if header is None:
        raise CaptureError(f"{source}: empty capture (no header line)")
    return header, turns


def write_capture(path: str | Path, header: CaptureHeader, turns: Iterable[CapturedTurn]) -> None:
    Path(path).write_bytes(encode_capture(header, turns))


def read_capture(path: str | Path) -> tuple[CaptureHeader, list[CapturedTurn]]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CaptureError(f"cannot read capture {str(path)!r}: {exc.strerror}") from None
    return decode_capture(data, source=p.name)


__all__ = [
    "CAPTURE_FORMAT",
    "CaptureError",
    "CaptureHeader",
    "CaptureLine",
    "CapturedTurn",
    "decode_capture",
    "encode_capture",
    "read_capture",
    "write_capture",
]
