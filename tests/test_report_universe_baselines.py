"""The reference portfolios of a universe (equal-weight buy-and-hold, cash) against our own
straightforward computation from the raw files: the StockBench universe over a window with its
real gap (16 of 20 symbols without bars 2025-02-11 .. 02-19), and a split and dividends held
through (Lean's AAPL 7:1 on 2014-06-09, IBM's and AAPL's August 2014 dividends)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pytest

from kestrel.data.universe import load_universe
from kestrel.report.universe_baselines import cash, equal_weight, reference_portfolios

from universe_support import STOCKBENCH, our_equal_weight, raw_bars

LEAN_DAILY = "equities_daily/lean_us_equities_daily_bars.parquet"
LEAN_FACTORS = "equities_daily/lean_us_equities_factor_files.csv"
CENT = 0.005 + 1e-9


@pytest.mark.parametrize("window", [("2025-01-21", "2025-03-31"), ("2025-02-11", "2025-04-30")])
def test_equal_weight_buy_and_hold_of_stockbench_matches_our_computation_from_the_raw_file(
        shared_data: Path, window: tuple[str, str]) -> None:
    # the second window starts in the gap: 16 symbols buy at their first open after it (02-20)
    first, last = (dt.date.fromisoformat(x) for x in window)
    universe = load_universe(shared_data / STOCKBENCH).universe
    dates = [s.date for s in universe.sessions if first <= s.date <= last]
    got = equal_weight(universe, 100_000.0, dates)
    qty, left, equity = our_equal_weight(raw_bars(shared_data / STOCKBENCH), 100_000.0, first, last)
    assert {p.symbol: int(p.qty) for p in got.purchases} == qty
    assert sum(1 for q in qty.values() if q) == 20
    late = [p.symbol for p in got.purchases if p.ts is not None
            and dt.datetime.fromtimestamp(p.ts / 1e9, dt.timezone.utc).date() > first]
    assert late == ([] if window[0] == "2025-01-21" else
                    [s for s in universe.symbols if s not in ("GS", "HD", "MSFT", "V")])
    closes = dict(got.equity_at_closes())
    assert set(closes) == {d.isoformat() for d in equity}
    for day, want in equity.items():
        assert abs(closes[day.isoformat()] - want) <= CENT, day
    assert abs(got.final_equity - equity[max(equity)]) <= CENT
    # until the late members buy, their share sits in cash
    bought_first = sum(float(p.qty) * (p.price or 0.0) for p in got.purchases if p.symbol not in late)
    before_late = int(np.searchsorted(got.curve.ts, min((p.ts or 0) for p in got.purchases), side="right")) - 1
    k = before_late if not late else int(np.searchsorted(got.curve.ts, int(got.curve.ts[0]), side="right")) - 1
    assert abs(float(got.curve.cash[k]) - round(100_000.0 - bought_first, 2)) <= CENT
    assert abs(float(got.curve.cash[-1]) - left) <= CENT


def test_a_split_and_dividends_held_through(shared_data: Path) -> None:
    universe = load_universe(shared_data / LEAN_DAILY, symbols=["AAPL", "IBM"], factors=shared_data / LEAN_FACTORS,
                             spikes="keep").universe
    first, last = dt.date(2014, 6, 2), dt.date(2014, 8, 15)
    dates = [s.date for s in universe.sessions if first <= s.date <= last]
    got = equal_weight(universe, 100_000.0, dates)
    raw = raw_bars(shared_data / LEAN_DAILY)
    px = {s: raw[(raw["symbol"] == s) & (raw["day"] >= first) & (raw["day"] <= last)].set_index("day")
          for s in ("AAPL", "IBM")}
    aapl = math.floor(50_000 / px["AAPL"]["open"].iloc[0])  # 634.00 on 2014-06-02: 78 shares
    ibm = math.floor(50_000 / px["IBM"]["open"].iloc[0])  # 184.77: 270 shares
    assert (aapl, ibm) == (78, 270)
    left = 100_000 - aapl * px["AAPL"]["open"].iloc[0] - ibm * px["IBM"]["open"].iloc[0]
    assert got.purchases[0].qty == 78 and got.purchases[1].qty == 270
    # 78 AAPL become 546 on 2014-06-09 (7:1); IBM pays 1.10 a share ex 2014-08-06, AAPL 0.47 ex 08-07
    closes = dict(got.equity_at_closes())

    def want(day: dt.date) -> float:
        cash_now = left + (270 * 1.10 if day >= dt.date(2014, 8, 6) else 0) + (546 * 0.47 if day >= dt.date(2014, 8, 7) else 0)
        held = (546 if day >= dt.date(2014, 6, 9) else 78) * px["AAPL"]["close"].loc[day] + 270 * px["IBM"]["close"].loc[day]
        return round(float(cash_now + held), 2)

    for day in (dt.date(2014, 6, 6), dt.date(2014, 6, 9), dt.date(2014, 8, 5), dt.date(2014, 8, 6),
                dt.date(2014, 8, 7), last):
        assert abs(closes[day.isoformat()] - want(day)) <= CENT, day
    # the split moves neither equity nor cash: the 7x position is marked at the 1/7 price
    assert abs(closes["2014-06-09"] - closes["2014-06-06"]) < 0.02 * closes["2014-06-06"]
    assert abs(float(got.curve.cash[-1]) - round(left + 297.0 + 256.62, 2)) <= CENT


def test_cash_is_the_capital_at_every_tick_and_both_share_the_run_ticks(shared_data: Path) -> None:
    universe = load_universe(shared_data / STOCKBENCH).universe
    dates = [s.date for s in universe.sessions[:10]]
    refs = reference_portfolios(universe, 25_000.0, dates)
    flat = refs["cash"].curve
    assert flat.equity.shape == refs["equal-weight buy-and-hold"].curve.equity.shape
    assert len(flat) == sum(1 for m in universe.members for s in m.data.sessions if s.date in dates) * 5
    assert np.all(flat.equity == 25_000.0) and np.all(flat.gross == 0.0)
    assert cash(universe, 25_000.0, dates).net_pnl == 0.0
    assert refs["cash"].max_drawdown == (0.0, None)


def test_a_member_whose_price_exceeds_its_share_buys_nothing_and_bad_input_is_refused(shared_data: Path) -> None:
    universe = load_universe(shared_data / STOCKBENCH).universe
    dates = [s.date for s in universe.sessions[:5]]
    p = equal_weight(universe, 4_000.0, dates)  # 200 a member: GS (about 600) buys none
    gs = next(x for x in p.purchases if x.symbol == "GS")
    assert gs.qty == 0 and gs.price is not None and gs.price > 200
    assert all(float(x.qty) * x.price <= 200 for x in p.purchases if x.price is not None)
    with pytest.raises(ValueError, match="capital must be a finite amount > 0"):
        equal_weight(universe, 0.0, dates)
    with pytest.raises(ValueError, match="2025-01-01 is not a session of the universe"):
        equal_weight(universe, 1_000.0, ["2025-01-01"])
