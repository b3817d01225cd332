"""The bench's peers (bench/peers.py) trade exactly as the engine on the SMA-bracket workload:
same round trips, same entry and exit ticks and sides, prices within half a tick. Each peer's
test skips when it is not installed (the `bench` extra)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest

from kestrel.engine.orders import TickGrid, bracket_price
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast

from bench import peers
from bench.engine_throughput import FLOOR_PLAN, make_days, plan_of

Days = list[tuple[SessionSpec, Ticks]]


def crafted(date: dt.date, n: int, cross: int, moves: list[int]) -> tuple[SessionSpec, Ticks]:
    """A session of n ticks: the bid flat at 100.00 up to `cross`, one cent up there (the mid
    crosses above its SMA(50) on that tick), then the one-cent `moves`, then flat; spread 0.01."""
    bids = [10000] * cross + [10001]
    for m in moves:
        bids.append(bids[-1] + m)
    bids = (bids + [bids[-1]] * n)[:n]
    s = SessionSpec.us_equity(date)
    ts = s.open_ns + np.arange(n, dtype=np.int64) * ((s.close_ns - s.open_ns) // n)
    b = np.array(bids, dtype=float)
    return s, Ticks.from_arrays(ts, b / 100.0, (b + 1.0) / 100.0)


def workload(last_tick_entry: bool) -> Days:
    """Three generated sessions of 3,000 ticks, then crafted ones: a target exit, a stop exit,
    a flatten, an entry on the second-to-last tick, a signal on the last tick (no trade) and,
    when asked, an entry on the last tick (bought and flattened on it)."""
    days = make_days(9_000, seed=5, sessions=3)
    d = dt.date(2024, 2, 5)
    days += [crafted(d, 400, 100, [1] * 120),
             crafted(d + dt.timedelta(days=1), 400, 100, [-1] * 60),
             crafted(d + dt.timedelta(days=2), 400, 200, [1] * 30),
             crafted(d + dt.timedelta(days=3), 400, 397, []),
             crafted(d + dt.timedelta(days=4), 400, 399, [])]
    if last_tick_entry:
        days.append(crafted(d + dt.timedelta(days=7), 400, 398, []))
    return days


def engine_side(days: Days) -> tuple[list[int], list[peers.Trade]]:
    signals, fills = peers.engine_fills(days, plan_of(FLOOR_PLAN))
    return signals, peers.round_trips(fills)


def exit_kinds(days: Days, trades: list[peers.Trade]) -> set[str]:
    ends = peers.session_bounds(days)[1]
    out = set()
    for t in trades:
        assert t.exit is not None
        out.add("flatten" if t.exit.ts in ends else "target" if t.exit.price > t.entry.price else "stop")
    return out


def test_bracket_levels_are_the_engines() -> None:
    grid = TickGrid(0.01)
    stop, target = ast.Offset("pct", -0.5), ast.Offset("pct", 1.0)
    for cents in range(1, 40_000, 7):
        px = cents / 100
        s, t = peers.bracket_levels(Decimal(repr(px)))
        assert (float(s), float(t)) == (bracket_price(px, stop, grid), bracket_price(px, target, grid))


def test_diff_trades_reports_a_difference() -> None:
    a = peers.Trade(peers.Fill(1, "buy", 100.0), peers.Fill(5, "sell", 99.5))
    assert peers.diff_trades([a], [a]) == ""
    assert peers.diff_trades([peers.Trade(a.entry, peers.Fill(5, "sell", 99.504))], [a]) == ""
    assert "exit" in peers.diff_trades([peers.Trade(a.entry, peers.Fill(6, "sell", 99.5))], [a])
    assert "exit" in peers.diff_trades([peers.Trade(a.entry, peers.Fill(5, "sell", 99.49))], [a])
    assert "round trips" in peers.diff_trades([], [a])


def test_nautilus_trades_match_the_engine() -> None:
    pytest.importorskip("nautilus_trader")
    days = workload(last_tick_entry=True)
    signals, ours = engine_side(days)
    assert exit_kinds(days, ours) == {"flatten", "target", "stop"}
    run = peers.nautilus_run(days)
    assert run is not None
    assert run.signals == signals
    assert peers.compare(run, ours) == (True, len(ours), "")


def test_backtrader_trades_match_the_engine() -> None:
    pytest.importorskip("backtrader")
    days = workload(last_tick_entry=False)
    signals, ours = engine_side(days)
    assert exit_kinds(days, ours) == {"flatten", "target", "stop"}
    run = peers.backtrader_run(days)
    assert run is not None
    assert run.ticks == sum(len(t) for _, t in days)
    assert run.signals == signals
    assert peers.compare(run, ours) == (True, len(ours), "")


def test_backtrader_reports_what_it_cannot_mirror() -> None:
    """An entry on a session's last tick: the engine buys and flattens on it, backtrader's
    strategy skips it, and the comparison says so rather than matching."""
    pytest.importorskip("backtrader")
    days = workload(last_tick_entry=True)
    _signals, ours = engine_side(days)
    run = peers.backtrader_run(days)
    assert run is not None and len(run.unmirrored) == 1
    match, trips, diff = peers.compare(run, ours)
    assert not match and trips == len(ours) - 1
    assert diff.startswith("1 entries on a session's last tick not mirrored")
