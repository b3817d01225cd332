"""What a session run returns: per ordinal (`OrdinalOutcome`), per day (`DayResult`) and for
the whole run (`SessionResult`, whose ledger and capture bytes are the determinism line)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from kestrel.engine.book import Carry
from kestrel.engine.ledger import Ledger, LedgerSummary
from kestrel.market import MarketData
from kestrel.market.account import Notice
from kestrel.session.capture import CaptureHeader, CapturedTurn, encode_capture
from kestrel.session.failure import RunFailure, run_failure
from kestrel.session.loop import Evidence
from kestrel.session.options import SessionOptions, engine_config
from kestrel.session.protocol import AgentTurn

if TYPE_CHECKING:
    from kestrel.session.days import SessionDay


class OrdinalOutcome(msgspec.Struct, frozen=True):
    """What happened at one ordinal (for reports): the terminal turn and the loop's cost."""

    date: str
    ordinal: str
    turn: AgentTurn
    iterations: int
    tokens_spent: int
    evidence: int
    escalations: int
    armed: str


def path_tally() -> dict[str, int]:
    """Ticks run per engine path (`fast`, `reference`), both keys always present."""
    return {"fast": 0, "reference": 0}


class DayResult(msgspec.Struct):
    """One session's outcome. `engine_ticks` counts the ticks each engine path ran (it may
    differ between the direct and the actor run, which batch the ticks differently; the
    ledger never does). `partial` marks a session the data does not span and `coverage`
    says how much it does (`kestrel.session.coverage`); PnL is in `currency`, the
    instrument's quote currency."""

    date: str
    ledger: Ledger
    outcomes: list[OrdinalOutcome]
    turns: list[CapturedTurn]
    evidence: list[Evidence]
    tz: str = "UTC"
    decimals: int = 2
    engine_ticks: dict[str, int] = msgspec.field(default_factory=path_tally)
    partial: bool = False
    coverage: str = ""
    currency: str = "USD"
    carry: Carry | None = None  # what the next session opens with (end_of_day="carry")
    # the broker's notices after the last ordinal's cutoff: told in the next session's first briefing
    untold: tuple[Notice, ...] = ()

    @property
    def summary(self) -> LedgerSummary:
        return self.ledger.summary()


class SessionResult(msgspec.Struct):
    header: CaptureHeader
    days: list[DayResult]
    engine_path: str = "auto"

    def ledger_jsonl(self) -> bytes:
        return b"".join(d.ledger.to_jsonl() for d in self.days)

    def capture_jsonl(self) -> bytes:
        """The capture, its header carrying the SHA-256 of `ledger_jsonl()`."""
        header = msgspec.structs.replace(self.header, ledger_sha256=hashlib.sha256(self.ledger_jsonl()).hexdigest())
        return encode_capture(header, [t for d in self.days for t in d.turns])

    @property
    def evidence(self) -> list[Evidence]:
        return [e for d in self.days for e in d.evidence]

    @property
    def failure(self) -> RunFailure | None:
        """Why the run failed (its agent could not work: `kestrel.session.failure`), or None."""
        return run_failure(self.evidence, sum(len(d.outcomes) for d in self.days))


def capture_header(
    data: MarketData, days: Sequence[SessionDay], agent_id: str, options: SessionOptions
) -> CaptureHeader:
    """The capture's header for a run of `days` by `agent_id` under `options`; without an
    explicit source, the one its loader recorded (`kestrel.data.source.source_of`), named by
    the file's path."""
    from kestrel.data.source import source_of

    source, name = options.source, options.data_name
    if source is None:
        source = source_of(data)
        if source is not None and source.kind == "file" and source.path is not None and name == "sample":
            name = source.path
    return CaptureHeader(
        data=name,
        symbol=data.symbol,
        dates=tuple(d.date for d in days),
        schedule=tuple(o.label for o in days[0].ordinals) if days else (),
        guard_s=options.guard_s,
        agent=agent_id,
        engine=engine_config(options, data),  # the engine the run used (instrument's multiplier)
        source=source,
        arm_latency=msgspec.UNSET if options.arm_latency is None else options.arm_latency,
        blind=True if options.blind else msgspec.UNSET,
    )


__all__ = ["DayResult", "OrdinalOutcome", "SessionResult", "capture_header", "path_tally"]
