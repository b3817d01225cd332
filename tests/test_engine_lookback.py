"""Windows and indicators that look back over a portfolio run's earlier sessions: on a
generated daily universe `chg(1d)`, `SPY.chg(1d)` and `sma(last, 20, 1d)` equal an independent
computation from the raw bars (pandas, over the ticks the documented daily-bar rule places); a
plan `FOR 5d` is re-armed at each open with its windows warm; an engine's history holds only
the run's earlier session ticks, strictly before the session; changing the data after a cutoff
changes no value before it; the reference and the vectorized path give the same ledger bytes
over random daily universes and plans with multi-day windows; a window longer than a run's
longest is refused and a session-scoped run keeps today's refusal."""

from __future__ import annotations

import datetime as dt
import math
import random
from pathlib import Path

import exchange_calendars as xcals
import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]  # exchange-calendars' own dependency
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel import lang
from kestrel.data.universe import load_universe
from kestrel.engine import EngineConfig
from kestrel.engine.plans import PlanError
from kestrel.engine.portfolio import PortfolioEngine
from kestrel.lang import ast
from kestrel.lang.limits import RUN_MAX_WINDOW_SECONDS
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.universe import Universe

RUN_LIMITS = lang.Limits(max_window_seconds=RUN_MAX_WINDOW_SECONDS)
BOUNDS = PortfolioBounds(capital=1e9, max_gross=1e3)
NEVER = "1000000"  # a level no condition reaches: the rules stay armed, every tick is evaluated


def _plan(text: str) -> ast.Plan:
    p = lang.parse(text, RUN_LIMITS)
    assert isinstance(p, ast.Plan)
    return p


def _bars(symbols: tuple[str, ...], first: str, last: str, seed: int) -> pd.DataFrame:
    """Seeded random daily bars (cents) of `symbols` over the XNYS sessions first..last."""
    days = xcals.get_calendar("XNYS").sessions_in_range(first, last)
    rng = np.random.default_rng(seed)
    frames = []
    for sym in symbols:
        close = np.round(100 * np.exp(np.cumsum(rng.normal(0, 0.02, len(days)))) * 100) / 100
        opn = np.round(close * (1 + rng.normal(0, 0.01, len(days))) * 100) / 100
        high = np.maximum(opn, close) + np.round(rng.uniform(0, 1, len(days)) * 100) / 100
        low = np.minimum(opn, close) - np.round(rng.uniform(0, 1, len(days)) * 100) / 100
        frames.append(pd.DataFrame({"date": [d.date() for d in days], "symbol": sym, "open": opn,
                                    "high": high, "low": low, "close": close,
                                    "volume": rng.integers(1000, 5000, len(days)).astype(float)}))
    return pd.concat(frames, ignore_index=True)


def _universe(tmp_path: Path, bars: pd.DataFrame, name: str = "bars.csv") -> Universe:
    path = tmp_path / name
    bars.to_csv(path, index=False)
    return load_universe(path).universe


def _raw_ticks(bars: pd.DataFrame, symbol: str) -> pd.DataFrame:
    """The ticks of `symbol`'s bars by the documented rule, computed here: at 0, 1/8, 1/4, 1/2
    and 3/4 of the XNYS session (from exchange_calendars), floored to the nanosecond: the open
    twice, then low and high (high and low when the bar falls), then close."""
    schedule = xcals.get_calendar("XNYS").schedule
    rows = []
    for k, bar in enumerate(bars[bars.symbol == symbol].itertuples()):
        day = pd.Timestamp(bar.date)
        opens, closes = schedule.loc[day, "open"].value, schedule.loc[day, "close"].value
        prices = ((bar.open, bar.open, bar.low, bar.high, bar.close) if bar.close >= bar.open
                  else (bar.open, bar.open, bar.high, bar.low, bar.close))
        for eighths, price in zip((0, 1, 2, 4, 6), prices):
            rows.append((opens + (closes - opens) * eighths // 8, price, k))
    return pd.DataFrame(rows, columns=["ts", "price", "session"])


def _expected_chg(ticks: pd.DataFrame, exact: bool = True) -> np.ndarray:
    """chg(1d) at each tick: 100 (price / ref - 1), ref the price of the latest tick at or
    before ts - 1 day (pandas merge_asof)."""
    back = pd.DataFrame({"at": ticks.ts - 86_400 * 10**9}).reset_index()
    ref = pd.merge_asof(back.sort_values("at"), ticks[["ts", "price"]].rename(columns={"ts": "at"}),
                        on="at", direction="backward", allow_exact_matches=exact).sort_values("index")
    return np.asarray(100.0 * (ticks.price.to_numpy() / ref.price.to_numpy() - 1.0), dtype=np.float64)


def _node_value(evaluation: object, name: str, symbol: str | None = None) -> float:
    nodes = evaluation.feeds[symbol].nodes if symbol else evaluation.nodes  # type: ignore[attr-defined]
    (found,) = [n for key, n in nodes.items() if key[0] == name]
    return float(found.value)


def _values_at_each_tick(universe: Universe, symbol: str, text: str,
                         reads: list[tuple[str, str | None]], **bounds: object) -> list[list[float]]:
    """Run `text` armed on `symbol` at every open on the reference path, one merged instant at
    a time; after each of `symbol`'s ticks the values of the indicators `reads` (name, the
    symbol read or None for its own)."""
    pe = PortfolioEngine(universe, {s: EngineConfig(maxorders=10_000) for s in universe.symbols},
                         PortfolioBounds(capital=1e9, max_gross=1e3, **bounds))  # type: ignore[arg-type]
    out: list[list[float]] = []
    for session in universe.sessions:
        pe.open_session(session)
        pe.arm(symbol, _plan(text))
        ts = universe[symbol].data.ticks.ts
        for t in ts[(ts >= session.open_ns) & (ts <= session.close_ns)].tolist():
            pe.run(t, "reference")
            evaluation = pe.engines[symbol].evaluation
            out.append([_node_value(evaluation, name, sym) for name, sym in reads])
        pe.close_session("reference")
    return out


@pytest.mark.parametrize("first,last", [("2024-02-01", "2024-07-31"), ("2024-08-01", "2024-12-31")])
def test_chg_spy_chg_and_a_20_day_sma_equal_an_independent_computation_from_the_raw_bars(
        tmp_path: Path, first: str, last: str) -> None:
    # weekends, Good Friday, both daylight-saving changes, the July 3, November 29 and December 24 half days
    bars = _bars(("AAA", "SPY", "XYZ"), first, last, seed=3)
    universe = _universe(tmp_path, bars)
    got = np.array(_values_at_each_tick(
        universe, "XYZ", f"PLAN p ON XYZ\nWHEN chg(1d) > {NEVER} OR SPY.chg(1d) > {NEVER} "
        f"OR sma(last, 20, 1d) > {NEVER}: BUY 1 MKT", [("chg", None), ("chg", "SPY"), ("sma", None)]))
    aaa, spy = _raw_ticks(bars, "XYZ"), _raw_ticks(bars, "SPY")
    assert len(got) == len(aaa) == 5 * len(universe.sessions)
    # chg: the first session has no tick a day back; every later one does (the run's history)
    want = _expected_chg(aaa)
    day0: npt.NDArray[np.bool_] = np.asarray(aaa.session.to_numpy() == 0, dtype=bool)
    assert np.isnan(got[day0, 0]).all()
    np.testing.assert_allclose(got[~day0, 0], want[~day0], rtol=1e-12)
    # SPY.chg at an XYZ tick: SPY's chg at its latest tick at or before it (SPY sorts first)
    spy_chg = _expected_chg(spy)
    before = np.searchsorted(spy.ts.to_numpy(), aaa.ts.to_numpy(), side="right") - 1
    want_spy = np.where(before >= 0, spy_chg[np.maximum(before, 0)], np.nan)
    np.testing.assert_allclose(got[:, 1], want_spy, rtol=1e-12)
    assert np.isfinite(got[~day0, 1]).all()
    # sma(last, 20, 1d): the mean of the 20 previous sessions' closes (each session one bar)
    close = bars[bars.symbol == "XYZ"].close.reset_index(drop=True)
    per_session = close.rolling(20).mean().shift(1).to_numpy()
    want_sma = per_session[aaa.session.to_numpy()]
    assert np.isnan(got[:100, 2]).all() and np.isfinite(got[100:, 2]).all()
    np.testing.assert_allclose(got[100:, 2], want_sma[100:], rtol=1e-12)


def test_a_run_looking_back_over_the_session_alone_starts_every_session_cold(tmp_path: Path) -> None:
    bars = _bars(("AAA", "SPY"), "2024-03-01", "2024-03-20", seed=5)
    universe = _universe(tmp_path, bars)
    got = np.array(_values_at_each_tick(universe, "AAA", f"PLAN p ON AAA\nWHEN chg(1h) > {NEVER}: BUY 1 MKT",
                                        [("chg", None)], lookback="session"))
    ticks = _raw_ticks(bars, "AAA")
    # within a session alone: ref the latest tick at or before t - 1h of the same session
    for k in range(len(universe.sessions)):
        rows = ticks[ticks.session == k]
        price, ts = rows.price.to_numpy(), rows.ts.to_numpy()
        j = np.searchsorted(ts, ts - 3600 * 10**9, side="right") - 1
        want = np.where(j >= 0, 100 * (price / price[np.maximum(j, 0)] - 1), np.nan)
        np.testing.assert_allclose(got[5 * k: 5 * k + 5, 0], want, rtol=1e-12)
    with pytest.raises(PlanError, match="longer than the session"):
        pe = PortfolioEngine(universe, {s: EngineConfig() for s in universe.symbols},
                             PortfolioBounds(capital=1e6, lookback="session"))
        pe.open_session(universe.sessions[0])
        pe.arm("AAA", _plan(f"PLAN p ON AAA\nWHEN chg(1d) > {NEVER}: BUY 1 MKT"))


def test_a_window_longer_than_a_runs_longest_is_refused_with_the_limit() -> None:
    assert RUN_MAX_WINDOW_SECONDS >= 252 * 86_400 * 7 // 5  # a year of daily sessions: sma(last, 252, 1d)
    with pytest.raises(lang.LangError, match="longer"):
        lang.parse(f"PLAN p\nWHEN last > high({RUN_MAX_WINDOW_SECONDS // 86_400 + 1}d): BUY 1 MKT", RUN_LIMITS)
    assert isinstance(lang.parse("PLAN p\nWHEN last > sma(last, 252, 1d): BUY 1 MKT", RUN_LIMITS), ast.Plan)


def test_a_universe_turn_takes_a_year_of_daily_windows_and_refuses_longer() -> None:
    from kestrel.session.ports import interpret_module
    from kestrel.session.protocol import Invalid, ModuleReply

    ok = interpret_module("PLAN p ON AAA\nWHEN last > high(20d) AND last > sma(last, 200, 1d): BUY 1 MKT", ["AAA"])
    assert isinstance(ok, ModuleReply)
    bad = interpret_module("PLAN p ON AAA\nWHEN last > high(400d): BUY 1 MKT", ["AAA"])
    assert isinstance(bad, Invalid) and "366d" in bad.error


def test_a_plan_for_5d_is_re_armed_at_each_open_with_its_windows_warm(tmp_path: Path) -> None:
    bars = _bars(("AAA",), "2024-04-01", "2024-04-30", seed=9)
    universe = _universe(tmp_path, bars)
    pe = PortfolioEngine(universe, {"AAA": EngineConfig()}, BOUNDS)
    text = f"PLAN p FOR 5d\nWHEN last > high(3d) + {NEVER}: BUY 1 MKT"
    ticks = _raw_ticks(bars, "AAA")
    ts, price = ticks.ts.to_numpy(), ticks.price.to_numpy()
    seen = []
    for k, session in enumerate(universe.sessions[:7]):
        pe.open_session(session)
        if k == 0:
            pe.arm("AAA", _plan(text))
        engine = pe.engines["AAA"]
        first = int(ts[5 * k])
        pe.run(first, "reference")
        if engine.armed:
            # high(3d) at the session's first tick: the highest last over ticks in [t - 3d, t)
            window = price[(ts >= first - 3 * 86_400 * 10**9) & (ts < first)]
            got = _node_value(engine.evaluation, "high")
            seen.append(k)
            if k >= 3:  # three days of history exist: defined, from the earlier sessions
                assert got == window.max()
            else:
                assert math.isnan(got)
        pe.close_session("reference")
    assert seen == [0, 1, 2, 3, 4]  # armed for five sessions, re-armed at the four later opens


def test_an_engines_history_is_the_runs_earlier_session_ticks_strictly_before_the_open(tmp_path: Path) -> None:
    bars = _bars(("AAA", "SPY"), "2024-03-01", "2024-03-29", seed=2)
    universe = _universe(tmp_path, bars)
    pe = PortfolioEngine(universe, {s: EngineConfig() for s in universe.symbols}, BOUNDS)
    for k, session in enumerate(universe.sessions):
        pe.open_session(session)
        for s in universe.symbols:
            before = pe.engines[s].before
            assert before is not None and len(before) == 5 * k
            assert not len(before) or int(before.ts[-1]) < session.open_ns
            data = universe[s].data.ticks
            np.testing.assert_array_equal(before.ts, data.ts[data.ts < session.open_ns])
        pe.close_session()


def test_changing_the_data_after_a_cutoff_changes_no_value_before_it(tmp_path: Path) -> None:
    bars = _bars(("AAA", "SPY"), "2024-03-01", "2024-04-30", seed=4)
    later = bars.copy()
    cut = later.date >= dt.date(2024, 4, 10)
    for col in ("open", "high", "low", "close"):
        later.loc[cut, col] = later.loc[cut, col] * 3.0
    text = (f"PLAN p ON AAA\nWHEN chg(2d) > {NEVER} OR SPY.chg(1d) > {NEVER} OR SPY.high(5d) > {NEVER} "
            f"OR ema(last, 5, 1d) > {NEVER}: BUY 1 MKT")
    reads = [("chg", None), ("chg", "SPY"), ("high", "SPY"), ("ema", None)]
    a = np.array(_values_at_each_tick(_universe(tmp_path, bars, "a.csv"), "AAA", text, reads))
    b = np.array(_values_at_each_tick(_universe(tmp_path, later, "b.csv"), "AAA", text, reads))
    n_before = 5 * int((bars[bars.symbol == "AAA"].date < dt.date(2024, 4, 10)).sum())
    np.testing.assert_array_equal(a[:n_before], b[:n_before])
    assert not np.allclose(a[n_before:, 0], b[n_before:, 0], equal_nan=True)


# ---------------------------------------------------------------- reference vs vectorized
ATOMS = ("last > high({d}d)", "last < low({d}d)", "chg({d}d) > {x}", "chg(1d) < -{x}",
         "mid CROSSES ABOVE sma(mid, {n}, 1d)", "last CROSSES BELOW ema(last, {n}, 1d)",
         "rsi({n}, 1d) > 55", "atr({n}, 1d) > {x}", "stdev(last, {n}, 1d) > {x}", "range({d}d) > {x}",
         "last > sma(last, {n})", "zscore(last, {n}, 1d) < -0.5", "vwap > open", "pos > 0 AND last < vwap")


def _random_plan(rng: random.Random, symbol: str) -> str:
    rules = []
    for _ in range(rng.randrange(1, 4)):
        atom = rng.choice(ATOMS).format(d=rng.randrange(1, 9), n=rng.randrange(2, 8), x=rng.choice([0.5, 1, 2]))
        action = rng.choice(["BUY 1 MKT", "SELL 1 MKT", "FLAT", "BUY 2 LMT bid"])
        rules.append(f"WHEN {atom}: {action} x{rng.randrange(1, 4)}")
    return f"PLAN r ON {symbol}\n" + "\n".join(rules)


def _run(universe: Universe, plans: dict[str, ast.Plan], path: str) -> PortfolioEngine:
    pe = PortfolioEngine(universe, {s: EngineConfig(end_of_day="carry") for s in universe.symbols}, BOUNDS)
    for session in universe.sessions:
        pe.open_session(session)
        for s, p in plans.items():
            pe.arm(s, p)
        pe.close_session(path)
    return pe


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> Universe:
    bars = _bars(("AAA", "BBB", "CCC"), "2024-02-20", "2024-04-10", seed=1)
    return _universe(tmp_path_factory.mktemp("daily"), bars)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1))
def test_reference_and_vectorized_agree_with_run_wide_history(daily: Universe, seed: int) -> None:
    rng = random.Random(seed)
    plans = {s: _plan(_random_plan(rng, s)) for s in daily.symbols}
    ref, auto = _run(daily, plans, "reference"), _run(daily, plans, "auto")
    assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl()


def test_the_vectorized_path_runs_with_history_and_trades_on_it(daily: Universe) -> None:
    plans = {s: _plan(f"PLAN r ON {s}\nWHEN last > high(4d): BUY 1 MKT x50\nWHEN last < low(4d): FLAT x50")
             for s in daily.symbols}
    ref, auto = _run(daily, plans, "reference"), _run(daily, plans, "auto")
    assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl()
    assert "fast" in auto.paths
    assert sum(1 for _, e in auto.ledger.entries if type(e).__name__ == "Filled") > 3


@pytest.mark.parametrize("seed", range(12))
def test_the_history_leaves_out_the_ticks_between_sessions(seed: int) -> None:
    """Ticks past a close (in no session) are not the run's: the history is exactly the earlier
    sessions' ticks, open to close, in order."""
    from portfolio_cases import random_universe

    universe = random_universe(random.Random(seed))
    pe = PortfolioEngine(universe, {s: EngineConfig() for s in universe.symbols}, BOUNDS)
    for k, session in enumerate(universe.sessions):
        pe.open_session(session)
        for s in universe.symbols:
            ts = universe[s].data.ticks.ts
            want = [t for earlier in universe.sessions[:k] for t in ts.tolist()
                    if earlier.open_ns <= t <= earlier.close_ns]
            before = pe.engines[s].before
            assert before is not None and before.ts.tolist() == want
        pe.close_session()


def test_another_symbols_last_is_its_last_trade_before_the_session_until_it_ticks(tmp_path: Path) -> None:
    bars = _bars(("AAA", "SPY"), "2024-03-04", "2024-03-08", seed=6)
    universe = _universe(tmp_path, bars)
    closes = bars[bars.symbol == "SPY"].close.tolist()
    for lookback, want in (("run", closes[:-1]), ("session", [math.nan] * (len(closes) - 1))):
        pe = PortfolioEngine(universe, {s: EngineConfig() for s in universe.symbols},
                             PortfolioBounds(capital=1e9, lookback=lookback))  # type: ignore[arg-type]
        got = []
        for session in universe.sessions:
            pe.open_session(session)
            pe.arm("AAA", _plan(f"PLAN p ON AAA\nWHEN SPY.last > {NEVER}: BUY 1 MKT"))
            evaluation = pe.engines["AAA"].evaluation
            assert evaluation is not None
            got.append(evaluation.feeds["SPY"].series["last"].value)
            pe.close_session()
        assert math.isnan(got[0])
        np.testing.assert_array_equal(got[1:], want)


def test_an_engine_refuses_history_that_reaches_its_session(tmp_path: Path) -> None:
    from kestrel.engine import Engine

    bars = _bars(("AAA",), "2024-03-04", "2024-03-06", seed=8)
    universe = _universe(tmp_path, bars)
    ticks, session = universe["AAA"].data.ticks, universe.sessions[1]
    Engine(EngineConfig(), session, "AAA", 0.01, history=ticks.slice(0, 5))  # the first session's: fine
    with pytest.raises(ValueError, match="history must end before the session opens"):
        Engine(EngineConfig(), session, "AAA", 0.01, history=ticks.slice(0, 6))
