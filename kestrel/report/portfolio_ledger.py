"""Reading the ledger of a portfolio run: one JSON line per event, in the order the events
happened in the merged run.

- A per-symbol line is a single-symbol ledger event with a leading `"symbol"` key
  (`{"symbol":"AAPL","event":"fill",...}`); its `tick` is the symbol's own tick index since the
  run started. It decodes as the `LedgerEvent` it is, the symbol read from the same bytes.
- Account-level lines: `account` (the account after a fill of any symbol and at each session
  close: `tick` the merged tick index, `ts`, `cash`, `equity`, `gross`, `net`, `open`), `split`
  (`symbol`, `ts`, `ratio` new shares per old, `pos_before`, `pos_after`, `avg_before`,
  `avg_after`) and `dividend` (`symbol`, `ts`, `per_share`, `pos`, `amount`). Fields a line has
  beyond these are ignored, so a writer may add some.

A line that is not JSON, names an unknown event, or lacks a field is a `PortfolioLedgerError`
naming its line number and what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import msgspec

from kestrel.engine.ledger import LedgerEvent


class AccountLine(msgspec.Struct, frozen=True, tag="account", tag_field="event"):
    """The account after a fill of any symbol or at a session close."""

    tick: int
    ts: int
    cash: float
    equity: float
    gross: float
    net: float
    open: int


class SplitLine(msgspec.Struct, frozen=True, tag="split", tag_field="event"):
    """A split applied to a held position."""

    symbol: str
    ts: int
    ratio: float
    pos_before: int | float
    pos_after: int | float
    avg_before: float | None = None
    avg_after: float | None = None


class DividendLine(msgspec.Struct, frozen=True, tag="dividend", tag_field="event"):
    """A cash dividend paid on a held position."""

    symbol: str
    ts: int
    per_share: float
    pos: int | float
    amount: float


PortfolioEvent: TypeAlias = LedgerEvent | AccountLine | SplitLine | DividendLine


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


def read_portfolio_ledger(data: bytes) -> list[PortfolioLine]:
    """The lines of a portfolio ledger, in order (module docstring)."""
    out: list[PortfolioLine] = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = _EVENT.decode(line)
            symbol = _STAMP.decode(line).symbol
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PortfolioLedgerError(f"ledger line {n}: {e}; each line is one event of a portfolio run's "
                                       "ledger (a symbol-stamped event, account, split or dividend)") from None
        if symbol is None and not isinstance(event, AccountLine):
            raise PortfolioLedgerError(f"ledger line {n}: a {type(event).__name__} event without a symbol; a "
                                       "portfolio ledger stamps every per-symbol event with its symbol")
        out.append(PortfolioLine(symbol, event))
    return out


def stamp(symbol: str, event_json: bytes) -> bytes:
    """A per-symbol event's JSON stamped with its symbol (the leading key), as a portfolio
    ledger writes it."""
    return b'{"symbol":' + msgspec.json.encode(symbol) + b"," + event_json[1:]


__all__ = ["AccountLine", "DividendLine", "PortfolioEvent", "PortfolioLedgerError", "PortfolioLine", "SplitLine",
           "read_portfolio_ledger", "stamp"]
