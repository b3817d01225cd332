"""Captured turns: the replay input, as msgspec JSON lines.

The first line is a `CaptureHeader` naming the data and the session (symbol, date, schedule,
guard, agent id, and the engine config: execution model and operator bounds) so a replay
needs no other flags; every further line is one `CapturedTurn`
(ordinal, terminal turn, agent id). The header's `source` is a typed `DataSource` (the data
file's path and SHA-256 with every loading option, or the sample's seed) and `ledger_sha256`
the SHA-256 of the run's ledger, so a replay can prove it runs on the same data and reproduces
the same ledger. `CaptureWriter` writes a capture while the run goes: the header first, then
each terminal turn appended and flushed as it is taken (an interrupted run keeps every
completed turn, and its header has no `ledger_sha256`: incomplete); at the end the whole file
is replaced atomically by the final one, whose header carries the ledger's checksum. Under an
arm latency the header records the setting and each turn the delay it was armed after, so a
replay arms every turn at the same moment; without one neither field is written. A blind run's
header says `"blind":true` (an unblinded run writes no such field), so its replay is blind too: the
turns (recorded as armed, in real values) are shown to the session in the blind scale and mapped
back exactly, and the replay's capture is byte for byte the run's. A model run's turns record their
calls (`calls`: model, kind, token usage; no latency, no cache hit), so a replay or report prices them
as the run did; a turn without model usage writes no such field. Never
recorded: the profile, the backend, the run's timestamp or anything else that differs between equivalent runs, so a `balanced` run, an
unflagged run and runs on asyncio and trio capture byte-identical files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Literal

import msgspec

from kestrel import lang
from kestrel.data.source import DataSource
from kestrel.engine.config import EngineConfig
from kestrel.outputs import atomic_write
from kestrel.session.protocol import AgentTurn, Supersede, Usage

CAPTURE_FORMAT = "kestrel-capture/2"
OLD_FORMATS = ("kestrel-capture/1",)


class CaptureHeader(msgspec.Struct, frozen=True, tag="header", tag_field="record"):
    """`data` is a human label (the report prints it); `source` is what replay loads and checks."""

    data: str
    symbol: str
    dates: tuple[str, ...]
    schedule: tuple[str, ...]
    guard_s: int
    agent: str
    format: str = CAPTURE_FORMAT
    source: DataSource | None = None
    ledger_sha256: str | None = None
    # the execution model and the operator's bounds the ledger was made under (replay uses it)
    engine: EngineConfig | None = None
    # the run's arm latency (`SessionOptions.arm_latency`), written only when one was set
    arm_latency: float | Literal["measured"] | msgspec.UnsetType = msgspec.UNSET
    # blind mode (`SessionOptions.blind`), written only when on: a replay runs blind again
    blind: bool | msgspec.UnsetType = msgspec.UNSET


class TurnCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """One model call of a turn as the run made it: the evidence kind and loop iteration, the
    model and its token usage. What a report prices (`kestrel.models.cost`); never replayed.
    Whether the reply cache answered it is not recorded (it is in the evidence): a rerun from
    the cache captures the very file the run that made the calls captured."""

    kind: str
    model: str
    usage: Usage
    iteration: int = 0


class CapturedTurn(msgspec.Struct, frozen=True, tag="turn", tag_field="record"):
    date: str
    ordinal: str
    turn: AgentTurn
    agent: str
    # under an arm latency: the nanoseconds after its ordinal the turn took effect (replay arms
    # it at the same moment); written only then
    arm_delay_ns: int | msgspec.UnsetType = msgspec.UNSET
    # the turn's model calls (`turn_calls`), written only for a turn whose calls spent tokens or
    # were answered from the reply cache: `replay` and `report` show the run's model, tokens
    # and dollars from them without its evidence file
    calls: tuple[TurnCall, ...] | msgspec.UnsetType = msgspec.UNSET


def turn_calls(evidence: Iterable[Any]) -> tuple[TurnCall, ...] | msgspec.UnsetType:
    """The model calls among a turn's evidence records (those with a latency, and each agent
    failure), UNSET when none spent a token (an agent that is not a model: its capture is as
    it always was; a reply from the cache carries the recorded call's usage)."""
    calls = tuple(TurnCall(e.kind, e.model, e.usage, e.iteration)
                  for e in evidence if e.latency_ms is not None or e.kind == "agent-error")
    if not any(c.usage.spend for c in calls):
        return msgspec.UNSET
    return calls


CaptureLine = CaptureHeader | CapturedTurn

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(CaptureLine)


class CaptureError(ValueError):
    """A capture file that cannot be read back (with the line that failed)."""


def _check_format(raw: bytes, source: str, n: int) -> None:
    """Old formats get a clear "re-capture" message instead of a field-by-field decode error:
    a `kestrel-capture/1` header names its data by a path string with no checksum, so a replay
    could not prove it runs on the same data."""
    try:
        fmt = msgspec.json.decode(raw, type=dict).get("format")
    except (msgspec.DecodeError, RecursionError, AttributeError):
        return
    if fmt in OLD_FORMATS:
        raise CaptureError(
            f"{source}:{n}: capture format {fmt!r} records no data checksum, so a replay cannot "
            f"check its data; re-capture it with this version (kestrel simulate ... --capture)"
        )


def encode_capture(header: CaptureHeader, turns: Iterable[CapturedTurn]) -> bytes:
    lines = [_encoder.encode(header)] + [_encoder.encode(t) for t in turns]
    return b"\n".join(lines) + b"\n"


def decode_capture(data: bytes, *, source: str = "capture") -> tuple[CaptureHeader, list[CapturedTurn]]:
    header: CaptureHeader | None = None
    turns: list[CapturedTurn] = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        if header is None and not turns:
            _check_format(raw, source, n)
        try:
            rec = _decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise CaptureError(f"{source}:{n}: not a capture record: {exc}") from None
        except RecursionError:
            raise CaptureError(f"{source}:{n}: not a capture record: nested too deeply") from None
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
    _check_turns(header, turns, source)
    return header, turns


def _check_turns(header: CaptureHeader, turns: list[CapturedTurn], source: str) -> None:
    """Fail closed on a capture a replay could not reproduce: the turns must be one per
    (date, ordinal) of the header's dates and schedule, in order, and every plan valid
    Kestrel (its canonical text parses back to the same plan)."""
    if not 0 <= header.guard_s < 86400:
        raise CaptureError(f"{source}:1: guard_s must be 0 to 86399 seconds, got {header.guard_s}")
    if not header.schedule or header.schedule[0] != "OPEN":
        raise CaptureError(f"{source}:1: the schedule must start with OPEN, got {list(header.schedule)}")
    slots = [(d, o) for d in header.dates for o in header.schedule]
    for k, turn in enumerate(turns):
        n = k + 2  # the header is line 1 (blank lines aside)
        if k >= len(slots) or (turn.date, turn.ordinal) != slots[k]:
            want = f"{slots[k][0]} {slots[k][1]}" if k < len(slots) else "no more turns"
            raise CaptureError(
                f"{source}: turn {k + 1} is for {turn.date} {turn.ordinal}, expected {want} "
                f"(the header's dates {list(header.dates)} x schedule {list(header.schedule)})"
            )
        if isinstance(turn.turn, Supersede):
            plan = turn.turn.plan
            try:
                ok = lang.parse(lang.format(plan)) == plan
                why = "its canonical text parses to another plan"
            except RecursionError:
                ok, why = False, "it is nested too deeply"
            except Exception as exc:  # the language says what is wrong with the plan
                ok, why = False, " ".join(str(exc).split())
            if not ok:
                raise CaptureError(
                    f"{source}: turn {k + 1} ({turn.date} {turn.ordinal}): plan {plan.name!r} "
                    f"is not valid Kestrel: {why}"
                )
    if len(turns) < len(slots):
        d, o = slots[len(turns)]
        raise CaptureError(
            f"{source}: the capture ends before {d} {o}: {len(slots) - len(turns)} turns missing"
        )


def write_capture(path: str | Path, header: CaptureHeader, turns: Iterable[CapturedTurn]) -> None:
    atomic_write(path, encode_capture(header, turns))


class CaptureWriter:
    """A capture written while the run goes (see the module docstring): `start(header)` writes
    the header, `turn(t)` appends one turn and flushes it, `finish(final)` replaces the file
    atomically with the final capture."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[bytes] | None = None

    def start(self, header: CaptureHeader) -> None:
        self._file = self.path.open("wb")
        self._line(_encoder.encode(header))

    def turn(self, turn: CapturedTurn) -> None:
        if self._file is not None:
            self._line(_encoder.encode(turn))

    def _line(self, raw: bytes) -> None:
        assert self._file is not None
        self._file.write(raw + b"\n")
        self._file.flush()

    def finish(self, final: bytes) -> None:
        self.close()
        atomic_write(self.path, final)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


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
    "CaptureWriter",
    "atomic_write",
    "CaptureHeader",
    "CaptureLine",
    "CapturedTurn",
    "TurnCall",
    "decode_capture",
    "encode_capture",
    "read_capture",
    "turn_calls",
    "write_capture",
]
