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

import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
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
    shares per old, the position and its average price before and after, and `cash` the cash
    in lieu of a fraction of a lot left over (signed: a long is paid it, a short pays it; 0 when
    the split leaves whole lots), at the account's money quantum."""

    tick: int
    ts: int
    ratio: float
    pos_before: int | float
    pos_after: int | float
    avg_before: float
    avg_after: float
    cash: float = 0.0


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


BLOCK_BYTES = 1 << 20
"""How many bytes of lines the ledger keeps as they were written before it compresses them as
one block."""


class PortfolioLedger:
    """An append-only ledger of (symbol or None, event), held as its canonical JSON lines: each
    event is encoded when it is appended, so a run of a million events holds bytes, not
    objects; `entries` and iteration decode them. The lines are kept in blocks: the last
    `block_bytes` or so as written, every earlier block of whole lines zlib-compressed (a long
    run's ledger takes a tenth of its bytes); `chunks()`, `to_jsonl()` and iteration give the
    same bytes whatever the blocks."""

    __slots__ = ("_base", "_block_bytes", "_blocks", "_data", "_ends", "_stamps", "_starts")

    def __init__(self, entries: Iterable[tuple[str | None, PortfolioEvent]] | None = None,
                 block_bytes: int = BLOCK_BYTES) -> None:
        if block_bytes < 1:
            raise ValueError(f"block_bytes must be >= 1, got {block_bytes}")
        self._block_bytes = block_bytes
        self._data = bytearray()  # the lines after the compressed blocks, as written
        self._blocks: list[bytes] = []  # earlier lines, compressed, in order
        self._starts = array("q")  # the offset (in the whole ledger) of each block's first byte
        self._base = 0  # the offset of `_data`'s first byte
        self._ends = array("q")  # the offset just past each line's newline
        self._stamps: dict[str, bytes] = {}  # per symbol, the start of its lines: `{"symbol":"AAPL",`
        for symbol, event in entries or ():
            self.append(symbol, event)

    def __len__(self) -> int:
        return len(self._ends)

    def append(self, symbol: str | None, event: PortfolioEvent) -> None:
        """Append one line: `{"symbol":...,` + the event's JSON, or the event alone."""
        body = _ENCODER.encode(event)
        data = self._data
        if symbol is None:
            data += body
        else:
            stamp = self._stamps.get(symbol)
            if stamp is None:
                stamp = self._stamps[symbol] = b'{"symbol":' + _ENCODER.encode(symbol) + b","
            data += stamp
            data += memoryview(body)[1:]
        data += b"\n"
        self._ends.append(self._base + len(data))
        if len(data) >= self._block_bytes:
            self._blocks.append(zlib.compress(data, 1))
            self._starts.append(self._base)
            self._base += len(data)
            data.clear()

    def truncate(self, n: int) -> None:
        """Keep the first `n` lines."""
        if n >= len(self._ends):
            return
        cut = self._ends[n - 1] if n else 0
        if cut < self._base:  # into a compressed block: it is the tail again, the later ones go
            k = bisect_right(self._starts, cut) - 1
            start = self._starts[k]
            self._data = bytearray(zlib.decompress(self._blocks[k]))
            del self._blocks[k:]
            del self._starts[k:]
            self._base = start
        del self._data[cut - self._base:]
        del self._ends[n:]

    def chunks(self) -> Iterator[bytes]:
        """The ledger's bytes (`to_jsonl()`) in order, a block at a time, each whole lines."""
        for block in self._blocks:
            yield zlib.decompress(block)
        if self._data:
            yield bytes(self._data)

    @property
    def nbytes(self) -> int:
        """The length of `to_jsonl()`."""
        return self._ends[-1] if len(self._ends) else 0

    def since(self, n: int) -> bytes:
        """The bytes of the lines from the `n`-th on (`to_jsonl()[offset of line n:]`)."""
        if n >= len(self._ends):
            return b""
        return self.bytes_from(self._ends[n - 1] if n > 0 else 0)

    def bytes_from(self, offset: int) -> bytes:
        """`to_jsonl()[offset:]`, reading only the blocks that hold it (`offset` a line's start)."""
        if offset >= self.nbytes:
            return b""
        start = max(0, offset)
        if start >= self._base:
            return bytes(self._data[start - self._base:])
        k = bisect_right(self._starts, start) - 1
        parts = [zlib.decompress(block) for block in self._blocks[k:]]
        parts[0] = parts[0][start - self._starts[k]:]
        parts.append(bytes(self._data))
        return b"".join(parts)

    def entries_since(self, n: int) -> list[tuple[str | None, PortfolioEvent]]:
        """The (symbol or None, event) pairs from the `n`-th on (`entries[n:]`), decoding only
        those lines."""
        return [(_STAMP.decode(line).symbol, _DECODER.decode(line)) for line in self.since(n).splitlines()]

    def to_jsonl(self) -> bytes:
        """One line per event: `{"symbol":...,` + the event's JSON, or the event alone."""
        return b"".join(self.chunks())

    def __iter__(self) -> Iterator[tuple[str | None, PortfolioEvent]]:
        """The (symbol or None, event) pairs in order, decoded one at a time."""
        for chunk in self.chunks():
            view = memoryview(chunk)
            start = 0
            while start < len(chunk):
                end = chunk.index(b"\n", start) + 1
                line = view[start:end]
                start = end
                yield _STAMP.decode(line).symbol, _DECODER.decode(line)

    @property
    def entries(self) -> list[tuple[str | None, PortfolioEvent]]:
        """Every (symbol or None, event), decoded."""
        return list(self)

    @classmethod
    def from_jsonl(cls, data: bytes) -> PortfolioLedger:
        out = cls()
        for line in data.splitlines():
            if line.strip():
                out.append(_STAMP.decode(line).symbol, _DECODER.decode(line))
        return out

    def of(self, symbol: str) -> Ledger:
        """`symbol`'s own engine events (its ticks counted since the run started), in order."""
        return Ledger([e for s, e in self  # type: ignore[misc]
                       if s == symbol and not isinstance(e, (SplitApplied, DividendPaid))])

    def accounts(self) -> list[AccountMark]:
        """The `account` marks, in order (the portfolio's equity series)."""
        return [e for _, e in self if isinstance(e, AccountMark)]


__all__ = ["BLOCK_BYTES", "AccountMark", "DividendPaid", "PortfolioEvent", "PortfolioLedger", "SplitApplied"]
