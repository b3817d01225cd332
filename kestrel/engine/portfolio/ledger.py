"""The ledger of a portfolio run: every symbol's events, stamped with the symbol, and the
account's own events, in the order they happen in the merged run.

A line of a symbol's event is that event's JSON with a leading `"symbol"` key
(`{"symbol":"AAPL","event":"fill",...}`); its `tick` is the symbol's own tick index since the
run started. Account-level events: `account` (`AccountMark`: cash, equity, gross and net
exposure and the open positions, after every `mark` of any symbol, so after every fill and at
each symbol's close), `split` (`SplitApplied`) and `dividend` (`DividendPaid`), the last two
with the symbol they concern. `account` lines have no symbol. Serialization is canonical (fields
in declaration order, shortest round-trip floats): two runs compare by bytes.
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from kestrel.engine.ledger import Ledger, LedgerEvent


class AccountMark(msgspec.Struct, frozen=True, gc=False, tag="account", tag_field="event"):
    """The account marked at the touch (docs/engine.md "The account"): `tick` the merged tick
    index since the run started, money at the universe currency's quantum, `open` the number of
    symbols holding a position."""

    tick: int
    ts: int
    cash: float
    equity: float
    gross: float
    net: float
    open: int


class SplitApplied(msgspec.Struct, frozen=True, gc=False, tag="split", tag_field="event"):
    """A position held into a split's ex-date, adjusted at the session's open: `ratio` new
    shares per old, the position and its average price before and after (the cost basis is
    unchanged)."""

    tick: int
    ts: int
    ratio: float
    pos_before: int | float
    pos_after: int | float
    avg_before: float
    avg_after: float


class DividendPaid(msgspec.Struct, frozen=True, gc=False, tag="dividend", tag_field="event"):
    """A cash dividend on a position held into its ex-date: `amount` = pos x per_share x
    multiplier credited to cash (a short pays it: a negative amount)."""

    tick: int
    ts: int
    per_share: float
    pos: int | float
    amount: float


PortfolioEvent: TypeAlias = LedgerEvent | AccountMark | SplitApplied | DividendPaid


class _Stamp(msgspec.Struct):
    symbol: str | None = None


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(PortfolioEvent)
_STAMP = msgspec.json.Decoder(_Stamp)


class PortfolioLedger:
    """An append-only list of (symbol or None, event) with the canonical JSON lines."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[str | None, PortfolioEvent]] | None = None) -> None:
        self.entries: list[tuple[str | None, PortfolioEvent]] = [] if entries is None else entries

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, symbol: str | None, event: PortfolioEvent) -> None:
        self.entries.append((symbol, event))

    def to_jsonl(self) -> bytes:
        """One line per event: `{"symbol":...,` + the event's JSON, or the event alone."""
        enc = _ENCODER.encode
        out: list[bytes] = []
        for symbol, event in self.entries:
            body = enc(event)
            out.append(body if symbol is None else b'{"symbol":' + enc(symbol) + b"," + body[1:])
        return b"".join(line + b"\n" for line in out)

    @classmethod
    def from_jsonl(cls, data: bytes) -> PortfolioLedger:
        entries: list[tuple[str | None, PortfolioEvent]] = []
        for line in data.splitlines():
            if line.strip():
                entries.append((_STAMP.decode(line).symbol, _DECODER.decode(line)))
        return cls(entries)

    def of(self, symbol: str) -> Ledger:
        """`symbol`'s own engine events (its ticks counted since the run started), in order."""
        return Ledger([e for s, e in self.entries  # type: ignore[misc]
                       if s == symbol and not isinstance(e, (SplitApplied, DividendPaid))])

    def accounts(self) -> list[AccountMark]:
        """The `account` marks, in order (the portfolio's equity series)."""
        return [e for _, e in self.entries if isinstance(e, AccountMark)]


__all__ = ["AccountMark", "DividendPaid", "PortfolioEvent", "PortfolioLedger", "SplitApplied"]
