"""What a hosted session tells the world: requests, terminal turns, ledger events, evidence, its end.

Every session of the `SessionHost` emits one ordered stream of `SessionEvent`s:

- `RequestEvent`: the agent is asked (`HostedRequest`: the briefing, the repair error, the
  view, what is left of the dual budget). An external agent answers it with a submit;
- `EvidenceEvent`: one authoring-loop evidence record (above the determinism line);
- `TurnEvent`: the terminal turn of an ordinal, exactly as captured (`replayed` marks a turn
  re-applied from a committed prefix on resume, never asked of the agent again);
- `PortfolioTurnEvent`: a universe session's terminal turn (its text and what it did), the
  turns of a session of the universe emitted, their evidence first, once that session closes,
  then `PortfolioLedgerLines`, the ledger lines that session added;
- `LedgerEvents`: the engine's ledger events, in ledger order (`index` is the position of the
  first one in its day's ledger, a natural idempotency key);
- `RunEnded`: the end of the run (`done`, `closed` or `failed`), with the `--json` summary.

Order (deterministic for a deterministic agent): for each ordinal, its requests, its evidence,
its turn, then the ledger events up to the next ordinal's first request; `RunEnded` last.
`seq` numbers the events of one session from 1 in that order (assigned by the host).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from kestrel.engine.ledger import LedgerEvent
from kestrel.session.capture import CapturedTurn
from kestrel.session.loop import Evidence
from kestrel.session.portfolio import CapturedPortfolioTurn


class BudgetLeft(msgspec.Struct, frozen=True):
    """What is left of the ordinal's dual budget when the request is made."""

    iterations: int
    tokens: int


class HostedRequest(msgspec.Struct, frozen=True):
    """One ask of the authoring loop, as an external agent sees it."""

    date: str
    ordinal: str
    iteration: int
    briefing: str
    repair_error: str | None
    view_name: str | None
    budget_left: BudgetLeft | None
    effort: str | None = None


class RequestEvent(msgspec.Struct, frozen=True, tag="request", tag_field="event"):
    request: HostedRequest
    seq: int = 0


class EvidenceEvent(msgspec.Struct, frozen=True, tag="evidence", tag_field="event"):
    record: Evidence
    seq: int = 0


class TurnEvent(msgspec.Struct, frozen=True, tag="turn", tag_field="event"):
    turn: CapturedTurn
    replayed: bool = False
    seq: int = 0


class PortfolioTurnEvent(msgspec.Struct, frozen=True, tag="portfolio_turn", tag_field="event"):
    """A terminal turn of a universe session (its text and what it did), emitted as its
    session closes."""

    turn: CapturedPortfolioTurn
    seq: int = 0


class PortfolioLedgerLines(msgspec.Struct, frozen=True, tag="portfolio_ledger", tag_field="event"):
    """A universe session's ledger lines, emitted as that session closes: `jsonl` the lines
    exactly as the run's ledger file holds them, `index` the run-wide number of the first."""

    date: str
    index: int
    jsonl: bytes
    seq: int = 0


class LedgerEvents(msgspec.Struct, frozen=True, tag="ledger", tag_field="event"):
    date: str
    index: int
    events: list[LedgerEvent]
    seq: int = 0


class RunEnded(msgspec.Struct, frozen=True, tag="end", tag_field="event"):
    state: str
    reason: str | None = None
    summary: dict[str, Any] | None = None
    seq: int = 0


SessionEvent: TypeAlias = (RequestEvent | EvidenceEvent | TurnEvent | PortfolioTurnEvent | LedgerEvents
                           | PortfolioLedgerLines | RunEnded)

__all__ = [
    "BudgetLeft",
    "EvidenceEvent",
    "HostedRequest",
    "LedgerEvents",
    "PortfolioLedgerLines",
    "PortfolioTurnEvent",
    "RequestEvent",
    "RunEnded",
    "SessionEvent",
    "TurnEvent",
]
