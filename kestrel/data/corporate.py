"""Corporate actions at load time: Lean factor files read into `FactorRow`s, adjusted series
beside the raw ones, and the jumps of a split's size no factor row explains.

Factor files (`read_factor_file`): a long CSV with a header `symbol, date, price_factor,
split_factor, reference_price` (one file for many symbols), or Lean's own per-symbol file
(`aapl.csv`: headerless rows `YYYYMMDD,price_factor,split_factor,reference_price`, the symbol
from the file name), or a folder of those. Dates are `YYYYMMDD` or `YYYY-MM-DD`. Rows must be
in date order per symbol with positive factors; a bad row is a `DataError` naming its line.

Adjustment (`adjust`): every tick's prices times the factors of its exchange date (the first
factor row dated on or after it), its size divided by the split factor; the result is a new
`MarketData` on the same instrument, the raw one untouched.

Split-sized jumps (`split_sized_jumps`): between consecutive sessions, the last price of one and
the first of the next whose ratio lies within `SPLIT_TOLERANCE` of a common split ratio r
(`RATIOS`: 3/2 up to 100, and the reverse ratios). The price alone cannot tell a split from a
crash or a rally of that size (AAPL fell 53.38 -> 28.06 on 2000-09-29, near 2:1, on an earnings
warning), so each jump carries the volume evidence, over `VOLUME_SESSIONS` held sessions on each
side of the jump session (session volume: the sum of its ticks' sizes):

- the spike: the jump session's volume over the median of the sessions after it. A split moves
  the volume to a new level and the jump session sits on it (at most 1.9 at the real splits of
  the Lean data); a crash or a rally is news, whose session trades a multiple of the days after
  (AAPL 2000-09-29: 9.6, AIG 2008-09-16: 6.1). Above `SPIKE_LIMIT` the jump reads as a gap.
- the share count: the median volume after over the median before (`volume_ratio`). A split of
  r new shares per old moves it towards r, but turnover drifts by a factor of two within months
  and traders trade a split stock less, so it is weak evidence for a split (the Lean data's AAPL
  2:1 of 2005 shows 1.02; a crash's volume stays raised for weeks, AAPL 2000: 2.5). It is used
  only against one: moved the other way by more than turnover drifts (`VOLUME_DRIFT`: volume
  more than doubled after a jump up, as in a rally, or more than halved after a drop), it reads
  as a gap.

The evidence can mislead both ways: a crash on ordinary volume reads as a split, a split whose
ex-date brings news that trades a spike reads as a gap; so gaps are reported too
(`verdict="gap"`), each with its figures, for the user to judge.

Where the data have no volume there (quotes, bars without a volume column, a jump at the edge of
the data) the price alone decides and the jump reads as a split. `probable_splits` keeps the
jumps that read as splits. On data with factor rows the check runs on the adjusted series
(prices times the factors, sizes divided by the split factor), so a split the rows explain leaves
no jump and a hit there is a split the rows lack.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from fractions import Fraction
from pathlib import Path

import numpy as np

from kestrel.data.errors import DataError
from kestrel.market.corporate import FactorRow, ProbableSplit, factors_on
from kestrel.market.data import MarketData
from kestrel.market.session import NS_PER_DAY
from kestrel.market.ticks import F64, I64, Ticks

_FORWARD = (Fraction(3, 2), Fraction(2), Fraction(5, 2), Fraction(3), Fraction(4), Fraction(5), Fraction(6),
            Fraction(7), Fraction(8), Fraction(10), Fraction(15), Fraction(20), Fraction(25), Fraction(30),
            Fraction(40), Fraction(50), Fraction(100))
RATIOS: tuple[Fraction, ...] = tuple(sorted(_FORWARD + tuple(1 / r for r in _FORWARD)))
"""Price ratios (previous close / next open) of the splits the check looks for."""
SPLIT_TOLERANCE = 0.05  # relative: AAPL's 7:1 of 2014 shows 645.57 / 92.69 = 6.965
VOLUME_SESSIONS = 20
"""Held sessions on each side of a jump whose volumes the check compares."""
SPIKE_LIMIT = 3.0
"""A jump session's volume over the median after it above which the jump reads as a gap."""
VOLUME_DRIFT = 2.0
"""How far turnover drifts on its own: a volume ratio beyond it against a split's direction
(below 1 / VOLUME_DRIFT after a drop, above VOLUME_DRIFT after a jump up) contradicts the split."""
_DATE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")
_EPOCH = dt.date(1970, 1, 1)
_LONG_HEADER = ("symbol", "date", "price_factor", "split_factor", "reference_price")


def _date(path: Path, text: str, line: int) -> dt.date:
    m = _DATE.match(text.strip())
    try:
        if m is None:
            raise ValueError
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        raise DataError(path, f"bad date {text.strip()[:20]!r}: expected YYYYMMDD or YYYY-MM-DD",
                        line=line, column="date") from None


def _number(path: Path, text: str, line: int, column: str, positive: bool) -> float:
    try:
        x = float(text)
    except ValueError:
        raise DataError(path, f"unparsable number {text.strip()[:20]!r}", line=line, column=column) from None
    if not np.isfinite(x) or (x <= 0 if positive else x < 0):
        raise DataError(path, f"{'a factor must be > 0' if positive else 'a price must be >= 0'}, got {x!r}",
                        line=line, column=column)
    return x


def _factor_lines(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(path, "not a factor file: not UTF-8 text") from None
    return [row for row in csv.reader(text.splitlines())]


def read_factor_file(path: str | Path) -> dict[str, tuple[FactorRow, ...]]:
    """Symbol -> its factor rows in date order (see the module docstring for the forms)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".csv")
        if not files:
            raise DataError(p, "no factor files (*.csv) in the folder")
        out: dict[str, tuple[FactorRow, ...]] = {}
        for f in files:
            out.update(read_factor_file(f))
        return out
    if not p.is_file():
        raise DataError(p, "no such factor file")
    lines = _factor_lines(p)
    if not lines:
        raise DataError(p, "the factor file is empty")
    head = [h.strip().lower() for h in lines[0]]
    by_symbol: dict[str, list[tuple[int, FactorRow]]] = {}
    if "symbol" in head:
        missing = [c for c in _LONG_HEADER if c not in head]
        if missing:
            raise DataError(p, f"factor file header lacks {', '.join(missing)}; expected {', '.join(_LONG_HEADER)}")
        at = {c: head.index(c) for c in _LONG_HEADER}
        body, first = lines[1:], 2
    else:
        at = {"date": 0, "price_factor": 1, "split_factor": 2, "reference_price": 3}
        body, first = lines, 1
    for i, row in enumerate(body):
        line = first + i
        if not row or not "".join(row).strip():
            continue
        if len(row) < len(at):
            raise DataError(p, f"expected {len(at)} fields, found {len(row)}", line=line)
        symbol = row[at["symbol"]].strip().upper() if "symbol" in at else p.stem.upper()
        if not symbol:
            raise DataError(p, "empty symbol", line=line, column="symbol")
        r = FactorRow(_date(p, row[at["date"]], line),
                      _number(p, row[at["price_factor"]], line, "price_factor", True),
                      _number(p, row[at["split_factor"]], line, "split_factor", True),
                      _number(p, row[at["reference_price"]], line, "reference_price", False))
        rows = by_symbol.setdefault(symbol, [])
        if rows and r.date <= rows[-1][1].date:
            raise DataError(p, f"{symbol} rows out of date order: {r.date} after {rows[-1][1].date} (line "
                            f"{rows[-1][0]}); sort the file by symbol and date", line=line, column="date")
        rows.append((line, r))
    return {s: tuple(r for _, r in rows) for s, rows in sorted(by_symbol.items())}


def tick_days(data: MarketData) -> I64:
    """Each tick's exchange date (days since 1970-01-01): its wall-clock date in the zone of the
    first session closing after it (pre- and post-market ticks keep their own day)."""
    ts = data.ticks.ts
    if not len(data.sessions):
        return (ts // NS_PER_DAY).astype(np.int64)
    k = np.minimum(np.searchsorted(data.session_close_ns, ts, side="right"), len(data.sessions) - 1)
    out: I64 = ((ts + data.session_offset_ns[k]) // NS_PER_DAY).astype(np.int64)
    return out


def adjust(data: MarketData, rows: tuple[FactorRow, ...]) -> MarketData:
    """`data` with prices times the factors of each tick's date and sizes divided by the split
    factor (`data` itself when there are no rows)."""
    if not rows:
        return data
    pf, sf = factors_on(rows, tick_days(data))
    f = pf * sf
    t = data.ticks
    ticks = Ticks(t.ts, t.bid * f, t.ask * f, t.last * f, t.size / sf)
    return MarketData(data.symbol, data.tick_size, ticks, data.sessions, data.crossed_kept, data.instrument)


_RATIO_VALUES = np.array([float(r) for r in RATIOS], dtype=np.float64)


def _volume_evidence(volumes: F64, p: int, r: float) -> tuple[float | None, float | None, bool]:
    """(volume ratio, spike, reads as a split) of the jump at held session `p` (module docstring)."""
    before, after = volumes[max(0, p - VOLUME_SESSIONS):p], volumes[p + 1:p + 1 + VOLUME_SESSIONS]
    if not before.size or not after.size:
        return None, None, True
    mb, ma = float(np.median(before)), float(np.median(after))
    if mb <= 0.0 or ma <= 0.0:
        return None, None, True
    ratio, spike = ma / mb, float(volumes[p]) / ma
    against = ratio < 1.0 / VOLUME_DRIFT if r > 1.0 else ratio > VOLUME_DRIFT
    return ratio, spike, spike <= SPIKE_LIMIT and not against


def split_sized_jumps(data: MarketData, *, adjusted: bool = False) -> list[ProbableSplit]:
    """Jumps of a split's size between consecutive sessions of `data` with their volume evidence
    and verdict (module docstring); `adjusted` marks data already adjusted by factor rows."""
    t = data.ticks
    lo = np.searchsorted(t.ts, data.session_open_ns, side="left")
    hi = np.searchsorted(t.ts, data.session_close_ns, side="left")
    held = np.flatnonzero(hi > lo)
    if held.size < 2:
        return []
    a, b = held[:-1], held[1:]
    prev, nxt = t.last[hi[a] - 1], t.last[lo[b]]
    near = np.abs((prev / nxt)[:, None] / _RATIO_VALUES[None, :] - 1.0) <= SPLIT_TOLERANCE
    hits = np.flatnonzero(near.any(axis=1))
    if not hits.size:
        return []
    cum = np.concatenate((np.zeros(1), np.cumsum(t.size)))
    volumes: F64 = cum[hi[held]] - cum[lo[held]]
    out: list[ProbableSplit] = []
    for j in hits:
        r = RATIOS[int(np.argmax(near[j]))]
        ratio, spike, split = _volume_evidence(volumes, int(j) + 1, float(r))
        out.append(ProbableSplit(data.symbol, data.sessions[int(b[j])].date, r.numerator, r.denominator,
                                 float(prev[j]), float(nxt[j]), adjusted, ratio, spike,
                                 "split" if split else "gap"))
    return out


def probable_splits(data: MarketData, *, adjusted: bool = False) -> list[ProbableSplit]:
    """The split-sized jumps of `data` that read as splits (module docstring)."""
    return [p for p in split_sized_jumps(data, adjusted=adjusted) if p.verdict == "split"]


__all__ = ["RATIOS", "SPIKE_LIMIT", "SPLIT_TOLERANCE", "VOLUME_DRIFT", "VOLUME_SESSIONS", "adjust", "probable_splits",
           "read_factor_file", "split_sized_jumps", "tick_days"]
