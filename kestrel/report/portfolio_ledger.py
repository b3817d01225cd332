"""Reading the ledger of a portfolio run: one JSON line per event, in the order the events
happened in the merged run.

- A per-symbol line is a single-symbol ledger event with a leading `"symbol"` key
  (`{"symbol":"AAPL","event":"fill",...}`); its `tick` is the symbol's own tick index since the
  run started. It decodes as the `LedgerEvent` it is, the symbol read from the same bytes.
- Account-level lines decode as the engine's own records (`kestrel.engine.portfolio.ledger`):
  `account` (`AccountMark`: the account after a fill of any symbol and at each session close:
  `tick` the merged tick index, `ts`, `cash`, `equity`, `gross`, `net`, `open`), `split`
  (`SplitApplied`, stamped with its symbol: `ts`, `ratio` new shares per old, `pos_before`,
  `pos_after`, `avg_before`, `avg_after`, `cash`) and `dividend` (`DividendPaid`, stamped:
  `ts`, `per_share`, `pos`, `amount`). Fields a line has beyond these are ignored, so a writer
  may add some.
- The report reads a split or a dividend by its `ts`: a line of either without the fields the
  report does not read (`tick`; a split's `avg_before`, `avg_after`, `cash`) is read as one
  with `tick` -1 (unknown), NaN averages and no cash in lieu; the symbol may be a field of the
  line (`"symbol":"AAPL"` anywhere in it), as the stamp is.

A line that is not JSON, names an unknown event, or lacks a field the report reads is a
`PortfolioLedgerError` naming its line number and what was wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, PortfolioEvent, SplitApplied

_UNREAD: dict[str, dict[str, Any]] = {  # per event: what a line of it may omit, as read then
    "split": {"tick": -1, "avg_before": math.nan, "avg_after": math.nan},
    "dividend": {"tick": -1},
}


class _Stamp(msgspec.Struct):
    symbol: str | None = None


_EVENT = msgspec.json.Decoder(PortfolioEvent)
_STAMP = msgspec.json.Decoder(_Stamp)


class PortfolioLedgerError(ValueError):
    """A ledger line that cannot be read (its number, from 1, and why)."""


@dataclass(frozen=True)
class PortfolioLine:
    """One ledger line: its symbol (None for an account line) and its event."""

    symbol: str | None
    event: PortfolioEvent


def _event(line: bytes) -> PortfolioEvent:
    """The line's event: decoded as it is, else (a split or dividend missing what the report
    does not read) with those fields filled (module docstring)."""
    try:
        return _EVENT.decode(line)
    except msgspec.ValidationError:
        raw = msgspec.json.decode(line)
        unread = _UNREAD.get(str(raw.get("event"))) if isinstance(raw, dict) else None
        if unread is None:
            raise
        event: PortfolioEvent = msgspec.convert({**unread, **raw}, PortfolioEvent)
        return event


def read_portfolio_ledger(data: bytes) -> list[PortfolioLine]:
    """The lines of a portfolio ledger, in order (module docstring)."""
    out: list[PortfolioLine] = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = _event(line)
            symbol = _STAMP.decode(line).symbol
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PortfolioLedgerError(f"ledger line {n}: {e}; each line is one event of a portfolio run's "
                                       "ledger (a symbol-stamped event, account, split or dividend)") from None
        if symbol is None and not isinstance(event, AccountMark):
            raise PortfolioLedgerError(f"ledger line {n}: a {type(event).__name__} event without a symbol; a "
                                       "portfolio ledger stamps every per-symbol event with its symbol")
        out.append(PortfolioLine(symbol, event))
    return out


def stamp(symbol: str, event_json: bytes) -> bytes:
    """A per-symbol event's JSON stamped with its symbol (the leading key), as a portfolio
    ledger writes it."""
    return b'{"symbol":' + msgspec.json.encode(symbol) + b"," + event_json[1:]


__all__ = ["AccountMark", "DividendPaid", "PortfolioEvent", "PortfolioLedgerError", "PortfolioLine", "SplitApplied",
           "read_portfolio_ledger", "stamp"]
