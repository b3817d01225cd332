"""News: dated headlines about symbols, and a feed that can be cut at an instant.

Invariants:
- a `NewsItem` has a publication instant `ts` (UTC ns), the symbols it is about (`symbols`,
  upper-case, at least one unless the vendor named none), a `source` (possibly empty), a
  non-empty `title` and a `summary` (possibly empty);
- a `NewsFeed` holds its items ordered by `ts` (ties kept in file order); `before(t)` is the
  feed of the items published strictly before `t`, in O(log n) and without copying items: the
  cut feed cannot reach a later item through its API (`items`, `latest`, `for_symbol`);
- a feed is immutable; everything read from it is a pure function of the feed and the cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from kestrel.market.ticks import I64


class NewsItem(msgspec.Struct, frozen=True):
    """One headline: published at `ts` (UTC ns) about `symbols`, from `source`."""

    ts: int
    symbols: tuple[str, ...]
    source: str
    title: str
    summary: str = ""


def _readonly(a: I64) -> I64:
    a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True)
class NewsFeed:
    """Items ordered by publication; only the first `end` of them are visible (see module)."""

    _items: tuple[NewsItem, ...]
    end: int = -1
    _ts: I64 = field(init=False, repr=False)
    _by_symbol: dict[str, I64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ts = np.fromiter((it.ts for it in self._items), dtype=np.int64, count=len(self._items))
        if ts.size > 1 and bool(np.any(ts[1:] < ts[:-1])):
            raise ValueError("news items must be ordered by publication time")
        if self.end < 0:
            object.__setattr__(self, "end", len(self._items))
        elif self.end > len(self._items):
            raise ValueError("a news feed's end cannot pass its items")
        positions: dict[str, list[int]] = {}
        for k, it in enumerate(self._items):
            for s in it.symbols:
                positions.setdefault(s, []).append(k)
        object.__setattr__(self, "_ts", _readonly(ts))
        object.__setattr__(
            self, "_by_symbol", {s: _readonly(np.asarray(p, dtype=np.int64)) for s, p in positions.items()}
        )

    @classmethod
    def of(cls, items: Iterable[NewsItem]) -> NewsFeed:
        """A feed of `items` in any order (sorted by publication, ties in the given order)."""
        return cls(tuple(sorted(items, key=lambda it: it.ts)))

    def before(self, t_ns: int) -> NewsFeed:
        """The items published strictly before `t_ns` (and before this feed's own cut)."""
        k = min(int(np.searchsorted(self._ts, t_ns, side="left")), self.end)
        cut = object.__new__(NewsFeed)  # the same arrays, a smaller end (no copy, no re-sort)
        for name, value in (("_items", self._items), ("end", k), ("_ts", self._ts), ("_by_symbol", self._by_symbol)):
            object.__setattr__(cut, name, value)
        return cut

    def __len__(self) -> int:
        return self.end

    def __iter__(self) -> Iterator[NewsItem]:
        return iter(self._items[: self.end])

    @property
    def items(self) -> tuple[NewsItem, ...]:
        return self._items[: self.end]

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol a visible item names, sorted."""
        return tuple(sorted(s for s, pos in self._by_symbol.items() if int(pos[0]) < self.end))

    def latest(self, symbols: Sequence[str] | None = None) -> Iterator[NewsItem]:
        """The visible items, newest first: all of them (`symbols` None) or those naming one
        of `symbols`."""
        if symbols is None:
            for k in range(self.end - 1, -1, -1):
                yield self._items[k]
            return
        if len(symbols) == 1:
            pos = self._by_symbol.get(symbols[0])
            if pos is None:
                return
            j = int(np.searchsorted(pos, self.end, side="left"))
            for k in pos[:j][::-1].tolist():
                yield self._items[k]
            return
        want = set(symbols)
        for k in range(self.end - 1, -1, -1):
            it = self._items[k]
            if want.intersection(it.symbols):
                yield it

    def for_symbol(self, symbol: str) -> tuple[NewsItem, ...]:
        """The visible items naming `symbol`, oldest first."""
        return tuple(reversed(tuple(self.latest((symbol,)))))


NO_NEWS = NewsFeed(())
"""The empty feed (a session without `--news`)."""


__all__ = ["NO_NEWS", "NewsFeed", "NewsItem"]
