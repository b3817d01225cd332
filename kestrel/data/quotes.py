"""Quote bars become quote ticks, and quotes join trades by time.

Quote bars: a bar opening at m (length `bar_seconds`) gives two quote ticks, its opening touch
(bid_open, ask_open) at m and its closing touch (bid_close, ask_close) at m + 3/4 of the bar,
the offset the close of a trade bar takes, so both kinds of bar of one minute line up; `last` is
the mid and `size` 0, as for any quote.

The join (`join_quotes`): trade ticks and quote ticks of one instrument merge into one stream
in time order; at one instant the quote comes before the trade. Each trade tick carries the
latest quote at or before it (bid = ask = last before the first quote) and each quote tick the
latest trade price at or before it as `last` (the mid before the first trade): an as-of join
backwards in time, so no tick reads a value recorded after it. Nothing else is filled: a minute
with no trade has no trade tick.
"""

from __future__ import annotations

import numpy as np

from kestrel.data.errors import DataError
from kestrel.data.readers import Table
from kestrel.market.ticks import F64, I64, NS_PER_S, Ticks


def quote_bar_ticks(t: Table, bar_seconds: int) -> tuple[I64, F64, F64, I64]:
    """(ts, bid, ask, row) of the quote bars of `t`: two ticks per bar; `row` is each tick's
    table row (for error messages)."""
    tf = bar_seconds * NS_PER_S
    close_gap = np.flatnonzero(np.diff(t.ts) < tf)
    if close_gap.size:
        i = int(close_gap[0]) + 1
        raise DataError(t.path, f"quote bar starts less than bar_seconds={bar_seconds} after the previous one",
                        column=t.columns["ts"], **t.where(i))
    ts = np.stack([t.ts, t.ts + 3 * tf // 4], axis=1).reshape(-1)
    bid = np.stack([t.values["bid_open"], t.values["bid"]], axis=1).reshape(-1)
    ask = np.stack([t.values["ask_open"], t.values["ask"]], axis=1).reshape(-1)
    return ts, bid, ask, np.repeat(np.arange(len(t.ts), dtype=np.int64), 2)


def join_quotes(trades: Ticks, quotes: Ticks) -> Ticks:
    """One stream of `trades` (bid = ask = last) and `quotes` (last = mid) by time, each tick
    completed by an as-of join backwards (see the module docstring). Both inputs are in time
    order; the result is too, quotes before trades at one instant."""
    n_t, n_q = len(trades), len(quotes)
    ts = np.concatenate((quotes.ts, trades.ts))
    is_trade = np.concatenate((np.zeros(n_q, dtype=bool), np.ones(n_t, dtype=bool)))
    order = np.lexsort((is_trade, ts))  # by time, then quotes (False) before trades
    ts, is_trade = ts[order], is_trade[order]
    pos = np.arange(len(ts), dtype=np.int64)
    # index (in the merged stream) of the latest quote / trade at or before each row, -1 if none
    last_q = np.maximum.accumulate(np.where(~is_trade, pos, -1))
    last_t = np.maximum.accumulate(np.where(is_trade, pos, -1))
    src = np.concatenate((np.arange(n_q), np.arange(n_t)))[order]  # row in its own input
    q_bid = np.where(~is_trade, quotes.bid[np.where(~is_trade, src, 0)] if n_q else 0.0, np.nan)
    q_ask = np.where(~is_trade, quotes.ask[np.where(~is_trade, src, 0)] if n_q else 0.0, np.nan)
    t_px = np.where(is_trade, trades.last[np.where(is_trade, src, 0)] if n_t else 0.0, np.nan)
    size = np.where(is_trade, trades.size[np.where(is_trade, src, 0)] if n_t else 0.0, 0.0)
    have_q, have_t = last_q >= 0, last_t >= 0
    bid = np.where(have_q, q_bid[np.maximum(last_q, 0)], t_px)
    ask = np.where(have_q, q_ask[np.maximum(last_q, 0)], t_px)
    last = np.where(have_t, t_px[np.maximum(last_t, 0)], (bid + ask) / 2.0)
    return Ticks(np.ascontiguousarray(ts), np.ascontiguousarray(bid, dtype=np.float64),
                 np.ascontiguousarray(ask, dtype=np.float64), np.ascontiguousarray(last, dtype=np.float64),
                 np.ascontiguousarray(size, dtype=np.float64))


__all__ = ["join_quotes", "quote_bar_ticks"]
