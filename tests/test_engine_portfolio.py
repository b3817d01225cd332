"""The engine over a universe: a portfolio of one symbol fills as the single-symbol engine
does; the reference and auto paths give the same ledger bytes over random universes, plans and
bounds; the account's identities hold at every mark (checked by an independent computation
from the ledger and the ticks); the bounds reject at placement and a rejection leaves the
account unchanged; the ledger round-trips and repeats byte for byte."""

from __future__ import annotations

import collections
import datetime as dt
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kestrel.data.universe import load_universe
from kestrel.engine import Engine, EngineConfig
from kestrel.engine.ledger import Filled, OrderPlaced, OrderRejected, PositionChanged
from kestrel.engine.portfolio import PortfolioEngine, run_universe
from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, PortfolioLedger, SplitApplied
from kestrel.market.data import MarketData
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe

from engine_cases import random_config, random_day, random_plan_text
from engine_helpers import SESSION, T0, S, plan
from portfolio_cases import random_run

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
LEAN_DAILY = "equities_daily/lean_us_equities_daily_bars.parquet"
FACTORS = "equities_daily/lean_us_equities_factor_files.csv"
BIG = PortfolioBounds(capital=1e12, max_gross=1e6)


def _universe(rows: dict[str, list[tuple[int, float, float]]]) -> Universe:
    """Symbols over SESSION from (ts, bid, ask) rows."""
    members = []
    for s in sorted(rows):
        r = rows[s]
        ticks = Ticks.from_arrays(np.array([x[0] for x in r], np.int64), np.array([x[1] for x in r]),
                                  np.array([x[2] for x in r]), np.array([(x[1] + x[2]) / 2 for x in r]),
                                  np.zeros(len(r)))
        data = MarketData(s, 0.01, ticks, (SESSION,))
        members.append(Member(s, data, data, Decimal(1)))
    return Universe(tuple(members), (SESSION,), "XNYS")


def _one_session(u: Universe, plans: dict[str, str], bounds: PortfolioBounds,
                 cfg: EngineConfig = EngineConfig(), path: str = "auto") -> PortfolioEngine:
    return run_universe(u, {s: cfg for s in u.symbols}, bounds, {s: plan(t) for s, t in plans.items()}, path=path)


def _rejects(pe: PortfolioEngine, symbol: str) -> list[str]:
    return [e.reason for s, e in pe.ledger.entries if s == symbol and isinstance(e, OrderRejected)]


# ---------------------------------------------------------------- one symbol = the single engine
@pytest.mark.parametrize("seed", range(40))
def test_a_portfolio_of_one_symbol_gives_the_single_symbol_engines_ledger(seed: int) -> None:
    rng = random.Random(seed)
    session, ticks = random_day(rng)
    cfg = random_config(rng)
    text = random_plan_text(rng)
    single = Engine(cfg, session, "TEST", 0.01)
    single.arm(plan(text))
    # the session's ticks, as a single-symbol session takes them (`SessionDay`: open to close)
    single.run(ticks.slice(ticks.index_at(session.open_ns, side="left"), ticks.index_at(session.close_ns)),
               path="reference")
    data = MarketData("TEST", 0.01, ticks, (session,))
    u = Universe((Member("TEST", data, data, Decimal(1)),), (session,), "XNYS")
    for path in ("reference", "auto"):
        pe = run_universe(u, {"TEST": cfg}, BIG, {"TEST": plan(text)}, path=path)
        assert pe.ledger.of("TEST").to_jsonl() == single.ledger.to_jsonl()


# ---------------------------------------------------------------- reference vs auto
def _paths_agree(seed: int) -> PortfolioEngine:
    ref = random_run(random.Random(seed), "reference")
    auto = random_run(random.Random(seed), "auto")
    assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl(), seed
    return auto


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_reference_and_auto_give_the_same_ledger_bytes_over_random_universes(seed: int) -> None:
    _paths_agree(seed)


def test_the_differential_runs_reach_every_bound_and_both_auto_outcomes() -> None:
    """Over 40 seeds: auto kept its fast result and fell back to the reference, and every kind of
    account rejection, a split held through and the ledgers all agree."""
    paths: collections.Counter[str] = collections.Counter()
    seen: collections.Counter[str] = collections.Counter()
    for seed in range(40):
        pe = _paths_agree(seed)
        paths.update(pe.paths)
        for _, e in pe.ledger.entries:
            if isinstance(e, OrderRejected):
                seen[e.reason.split(" ")[0].rstrip(":")] += 1
            elif isinstance(e, SplitApplied):
                seen["split"] += 1
    assert paths["fast"] and paths["reference"]
    for kind in ("no-short", "cannot", "max", "split"):
        assert seen[kind], (kind, seen)


# ---------------------------------------------------------------- the account, independently
def _merged_touches(u: Universe) -> list[tuple[int, str, float, float]]:
    """Every tick of the run in merged order: (ts, symbol, bid, ask), sorted by session, then by
    (ts, symbol, index) with Python's sort."""
    out: list[tuple[int, str, float, float]] = []
    for session in u.sessions:
        rows = []
        for m in u.members:
            t = m.data.ticks
            for i in range(len(t)):
                if session.open_ns <= t.ts[i] <= session.close_ns:
                    rows.append((int(t.ts[i]), m.symbol, i, float(t.bid[i]), float(t.ask[i])))
        rows.sort()
        out += [(ts, s, b, a) for ts, s, _, b, a in rows]
    return out


def _check_account(pe: PortfolioEngine) -> int:
    """At every account mark: cash = capital - fills + dividends, equity = cash + the values at
    the touch, gross and net and the open count, all from the ledger and the ticks; returns the
    number of marks checked."""
    u = pe.universe
    merged = _merged_touches(u)
    mult = {s: Decimal(repr(pe.configs[s].multiplier)) for s in u.symbols}
    cash = Decimal(repr(pe.bounds.capital))
    pos = {s: Decimal(0) for s in u.symbols}
    touch: dict[str, tuple[float, float]] = {}
    splits: list[tuple[str | None, int, float]] = []
    checked = 0
    half = Decimal(1).scaleb(-pe.funds.decimals) / 2
    for s, e in pe.ledger.entries:
        if isinstance(e, Filled):
            q = Decimal(repr(e.qty)) * (1 if e.side == "buy" else -1)
            cash -= q * Decimal(repr(e.price)) * mult[s] + Decimal(repr(e.fee))  # type: ignore[index]
        elif isinstance(e, PositionChanged):
            pos[s] = Decimal(repr(e.pos))  # type: ignore[index]
        elif isinstance(e, SplitApplied):
            assert s is not None
            rest = Decimal(repr(e.pos_before)) * Decimal(repr(e.ratio)) - Decimal(repr(e.pos_after))
            lieu = Decimal(0)
            if rest:  # cash in lieu of the fraction: at the last touch before the split, / ratio
                before = [(ts, b, a) for ts, sym, b, a in merged if sym == s and ts < e.ts]
                if before:
                    when_touched, b, a = before[-1]
                    mark = b if e.pos_before > 0 else a
                    for who, when, ratio in splits:  # an earlier split since that touch
                        if who == s and when_touched < when:
                            mark /= ratio
                    lieu = rest * Decimal(repr(mark)) / Decimal(repr(e.ratio)) * mult[s]
            assert abs(Decimal(repr(e.cash)) - lieu) <= half + Decimal("1e-12")
            cash += lieu
            pos[s] = Decimal(repr(e.pos_after))
            splits.append((s, e.ts, e.ratio))
        elif isinstance(e, DividendPaid):
            cash += Decimal(repr(e.amount))
        elif isinstance(e, AccountMark):
            touch = {}
            for ts, sym, b, a in merged[: e.tick + 1]:
                if ts <= e.ts:
                    touch[sym] = (b, a)
            for sym in list(touch):  # a touch from before a split since, at the new count
                for who, when, ratio in splits:
                    if who == sym and last_ts(merged[: e.tick + 1], sym, e.ts) < when:
                        touch[sym] = (touch[sym][0] / ratio, touch[sym][1] / ratio)
            values = []
            for sym in u.symbols:
                if pos[sym]:
                    b, a = touch[sym] if sym in touch else pe_last(pe, sym, touch)
                    values.append(pos[sym] * Decimal(repr(b if pos[sym] > 0 else a)) * mult[sym])
            assert abs(Decimal(repr(e.cash)) - cash) <= half + Decimal("1e-12")
            assert abs(Decimal(repr(e.equity)) - (cash + sum(values))) <= half + Decimal("1e-12")
            assert abs(Decimal(repr(e.gross)) - sum(abs(v) for v in values)) <= half + Decimal("1e-12")
            assert abs(Decimal(repr(e.net)) - sum(values)) <= half + Decimal("1e-12")
            assert e.open == len(values)
            checked += 1
    return checked


def last_ts(merged: list[tuple[int, str, float, float]], sym: str, upto: int) -> int:
    return max((ts for ts, s, _, _ in merged if s == sym and ts <= upto), default=-1)


def pe_last(pe: PortfolioEngine, sym: str, touch: dict[str, tuple[float, float]]) -> tuple[float, float]:
    raise AssertionError(f"{sym} holds a position before its first tick")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
@example(9495)  # a reverse split of a short leaves half a share: the short pays cash in lieu
def test_equity_is_cash_plus_values_at_every_account_mark(seed: int) -> None:
    pe = random_run(random.Random(seed), "auto")
    assert _check_account(pe) > 0  # at least the session closes' marks


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_a_rejected_order_never_changes_cash(seed: int) -> None:
    """Cash moves only with fills and dividends: between two account marks with no fill between
    them (rejections or not), the cash is the same."""
    pe = random_run(random.Random(seed), "auto")
    last: float | None = None
    moved = False
    for _, e in pe.ledger.entries:
        if isinstance(e, (Filled, DividendPaid, SplitApplied)):
            moved = True
        elif isinstance(e, AccountMark):
            if last is not None and not moved:
                assert e.cash == last
            last, moved = e.cash, False


# ---------------------------------------------------------------- the bounds, one by one
ROWS = {
    "AAA": [(T0 + k * S, 100.0, 100.02) for k in range(10)],
    "BBB": [(T0 + k * S, 50.0, 50.02) for k in range(10)],
    "CCC": [(T0 + k * S, 20.0, 20.01) for k in range(10)],
}


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_an_order_the_account_cannot_fund_is_rejected_and_nothing_moves(path: str) -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: BUY 30 MKT"}, PortfolioBounds(capital=2000.0), path=path)
    assert _rejects(pe, "AAA") == ["cannot fund: the buy costs 3000.60, cash not committed is 2000.00"]
    assert not any(isinstance(e, Filled) for _, e in pe.ledger.entries)
    st_ = pe.state()
    assert (st_.cash, st_.equity, st_.open_positions) == (2000.0, 2000.0, 0)


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_working_buys_commit_cash(path: str) -> None:
    """Two buys of 15 x 100.02 fit 2,000 only one at a time: the second waits on the first's cash."""
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN time >= 09:30:00: BUY 15 LMT 99.00\n"
                                       "WHEN time >= 09:30:02: BUY 15 LMT 99.00"},
                      PortfolioBounds(capital=2000.0), path=path)
    assert _rejects(pe, "AAA") == ["cannot fund: the buy costs 1485.00, cash not committed is 515.00"]


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_no_short_refuses_a_short_but_lets_a_long_be_sold(path: str) -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: SELL 10 MKT",
                          "BBB": "PLAN b\nWHEN pos == 0 AND time < 09:30:03: BUY 10 MKT\n"
                                 "WHEN pos > 0: SELL 10 MKT"},
                      PortfolioBounds(capital=10000.0, no_short=True), path=path)
    assert _rejects(pe, "AAA") == ["no-short: AAA would reach -10"]
    fills = [(e.side, e.qty) for s, e in pe.ledger.entries if s == "BBB" and isinstance(e, Filled)]
    assert fills == [("buy", 10), ("sell", 10)]
    assert pe.state().holdings[1].position == 0


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_max_open_positions(path: str) -> None:
    u = _universe(ROWS)
    buy = "PLAN p\nWHEN pos == 0: BUY 1 MKT"
    pe = _one_session(u, {"AAA": buy, "BBB": buy, "CCC": buy}, PortfolioBounds(capital=10000.0, max_open=2),
                      path=path)
    assert _rejects(pe, "CCC") == ["max open positions 2 reached"]
    assert [s for s, e in pe.ledger.entries if isinstance(e, Filled) and e.side == "buy"] == ["AAA", "BBB"]


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_max_gross_against_equity(path: str) -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: SELL 30 MKT"},
                      PortfolioBounds(capital=2000.0, max_gross=1.0), path=path)
    assert _rejects(pe, "AAA") == ["max gross 1x equity: gross would reach 3000.00 against equity 2000.00"]


def test_the_portfolio_session_maxloss_stands_everything_down_and_flattens() -> None:
    falling = {"AAA": [(T0 + k * S, 100.0 - k, 100.02 - k) for k in range(10)],
               "BBB": [(T0 + k * S, 50.0, 50.02) for k in range(10)]}
    u = _universe(falling)
    buy = "PLAN p\nWHEN pos == 0: BUY 10 MKT"
    pe = _one_session(u, {"AAA": buy, "BBB": buy}, PortfolioBounds(capital=10000.0, session_maxloss=25.0))
    reasons = {e.reason for _, e in pe.ledger.entries if hasattr(e, "reason")}
    assert "portfolio session maxloss 25 breached: the portfolio stands down" in reasons
    exits = [(s, e.side, e.qty) for s, e in pe.ledger.entries if isinstance(e, Filled) and e.side == "sell"]
    assert sorted(exits) == [("AAA", "sell", 10), ("BBB", "sell", 10)]  # each at its next tick
    assert pe.state().open_positions == 0


# ---------------------------------------------------------------- tie order and the ledger
def test_ticks_at_one_instant_run_in_symbol_order_and_the_ledger_names_them() -> None:
    u = _universe(ROWS)
    buy = "PLAN p\nWHEN pos == 0: BUY 1 MKT"
    pe = _one_session(u, {"CCC": buy, "AAA": buy}, PortfolioBounds(capital=10000.0))
    fills = [s for s, e in pe.ledger.entries if isinstance(e, Filled) and e.side == "buy"]
    assert fills == ["AAA", "CCC"]
    lines = pe.ledger.to_jsonl().splitlines()
    assert lines[0].startswith(b'{"symbol":"AAA","event":"armed","tick":0,')
    acct = [ln for ln in lines if ln.startswith(b'{"event":"account"')]
    assert acct[0] == (b'{"event":"account","tick":3,"ts":%d,"cash":9899.98,"equity":9999.98,"gross":100.0,'
                       b'"net":100.0,"open":1}' % (T0 + S))
    again = _one_session(u, {"CCC": buy, "AAA": buy}, PortfolioBounds(capital=10000.0))
    assert again.ledger.to_jsonl() == pe.ledger.to_jsonl()
    assert PortfolioLedger.from_jsonl(pe.ledger.to_jsonl()).to_jsonl() == pe.ledger.to_jsonl()


# ---------------------------------------------------------------- real data
def test_aapl_held_into_the_2014_split_becomes_700_at_a_seventh_of_the_cost(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, factors=shared_data / FACTORS, symbols=["AAPL", "SPY"],
                      spikes="keep")
    u = r.universe
    sessions = [s for s in u.sessions if dt.date(2014, 6, 4) <= s.date <= dt.date(2014, 6, 11)]
    cfg = EngineConfig(end_of_day="carry", maxpos=1000)
    pe = PortfolioEngine(u, {s: cfg for s in u.symbols}, PortfolioBounds(capital=100000.0))
    buy = plan("PLAN hold ON AAPL\nWHEN pos == 0: BUY 100 MKT")
    for k, session in enumerate(sessions):
        pe.open_session(session)
        if k == 0:
            pe.arm("AAPL", buy)
        pe.close_session()
    splits = [e for s, e in pe.ledger.entries if isinstance(e, SplitApplied)]
    assert len(splits) == 1
    sp = splits[0]
    assert (sp.ts, sp.ratio, sp.pos_before, sp.pos_after) == (
        [s for s in sessions if s.date == dt.date(2014, 6, 9)][0].open_ns, 7.0, 100, 700)
    fill = next(e for s, e in pe.ledger.entries if isinstance(e, Filled))
    assert sp.avg_before == fill.price
    assert Fraction(repr(sp.avg_after)) == pytest.approx(Fraction(repr(fill.price)) / 7, abs=1e-9)
    h = pe.state().holdings[0]
    assert h.position == 700
    # the cost basis is unchanged: 700 x avg_after = 100 x the fill price
    assert h.avg_entry is not None and abs(700 * h.avg_entry - 100 * fill.price) < 1e-6
    assert pe.state().cash == 100000.0 - 100 * fill.price


def test_a_dividend_is_credited_on_a_position_held_into_its_ex_date(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, factors=shared_data / FACTORS, symbols=["AAPL"], spikes="keep")
    u = r.universe
    div = next(d for d in u.dividends if d.date.year == 2014 and d.date.month == 8)
    sessions = [s for s in u.sessions if div.date - dt.timedelta(days=6) <= s.date <= div.date]
    cfg = EngineConfig(end_of_day="carry", maxpos=1000)
    pe = PortfolioEngine(u, {"AAPL": cfg}, PortfolioBounds(capital=100000.0))
    for k, session in enumerate(sessions):
        pe.open_session(session)
        if k == 0:
            pe.arm("AAPL", plan("PLAN hold\nWHEN pos == 0: BUY 100 MKT"))
        pe.close_session()
    paid = [e for _, e in pe.ledger.entries if isinstance(e, DividendPaid)]
    assert len(paid) == 1 and paid[0].pos == 100 and paid[0].per_share == div.amount
    # the factor file's amount is read as given (0.470003 for the $0.47 of 2014-08-07), credited exactly
    want = Decimal(100) * Decimal(repr(div.amount))
    assert Decimal(repr(paid[0].amount)) == want
    fill = next(e for _, e in pe.ledger.entries if isinstance(e, Filled))
    assert Decimal(repr(pe.state().cash)) == Decimal("100000") - 100 * Decimal(repr(fill.price)) + want


def test_a_symbol_with_missing_sessions_has_no_ticks_and_fills_nothing_there(shared_data: Path) -> None:
    r = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "MSFT", "GS"])
    u = r.universe
    gap = [s for s in u.sessions if dt.date(2025, 2, 10) <= s.date <= dt.date(2025, 2, 20)]
    holes = {s: set(u[s].missing) for s in u.symbols}
    assert any(holes.values())
    cfg = EngineConfig(maxpos=100)
    pe = run_universe(u, {s: cfg for s in u.symbols}, PortfolioBounds(capital=100000.0),
                      {s: plan("PLAN p\nWHEN pos == 0: BUY 1 MKT") for s in u.symbols}, sessions=gap)
    per_day: dict[tuple[str, dt.date], int] = collections.Counter()
    day_of = {}
    for session in gap:
        day_of[session.date] = (session.open_ns, session.close_ns)
    for s, e in pe.ledger.entries:
        if isinstance(e, Filled):
            day = next(d for d, (o, c) in day_of.items() if o <= e.ts <= c)
            per_day[(s, day)] += 1  # type: ignore[index]
    for s in u.symbols:
        for session in gap:
            if session.date in holes[s]:
                assert per_day[(s, session.date)] == 0
            else:
                assert per_day[(s, session.date)] >= 1, (s, session.date)


# ---------------------------------------------------------------- plans FOR n sessions
def _days(n: int) -> Universe:
    import datetime as dt_

    from kestrel.market.session import SessionSpec

    sessions = tuple(SessionSpec(dt_.date(2024, 4, 8 + k)) for k in range(n))
    ts, bid = [], []
    for k, sess in enumerate(sessions):
        for j in range(20):
            ts.append(sess.open_ns + j * 60 * S)
            bid.append(100.0 + k + j * 0.01)
    t = Ticks.from_arrays(np.array(ts, np.int64), np.array(bid), np.array(bid) + 0.02, np.array(bid), np.zeros(len(ts)))
    data = MarketData("AAA", 0.01, t, sessions)
    return Universe((Member("AAA", data, data, Decimal(1)),), sessions, "XNYS")


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_a_plan_for_3d_lives_three_sessions_with_its_position_and_stop_carried(path: str) -> None:
    u = _days(5)
    pe = PortfolioEngine(u, {"AAA": EngineConfig(end_of_day="carry")}, PortfolioBounds(capital=10000.0))
    for k, session in enumerate(u.sessions):
        pe.open_session(session)
        if k == 0:
            pe.arm("AAA", plan("PLAN p FOR 3d\nWHEN pos == 0: BUY 1 MKT STOP -5"))
        pe.close_session(path)
    from kestrel.engine.ledger import Armed, Carried

    armed_days = [next(i for i, s in enumerate(u.sessions) if s.open_ns <= e.ts <= s.close_ns)
                  for _, e in pe.ledger.entries if isinstance(e, Armed)]
    assert armed_days == [0, 1, 2]
    assert [e.pos for _, e in pe.ledger.entries if isinstance(e, Carried)] == [1, 1, 1, 1]
    stops = [e for _, e in pe.ledger.entries if isinstance(e, OrderPlaced) and e.role == "stop"]
    assert [e.plan for e in stops] == ["p", "carried", "carried", "carried", "carried"]
    assert sum(1 for _, e in pe.ledger.entries if isinstance(e, Filled)) == 1  # bought once, held


def test_a_stand_down_ends_a_plan_for_n_sessions() -> None:
    u = _days(3)
    pe = PortfolioEngine(u, {"AAA": EngineConfig(end_of_day="carry")}, PortfolioBounds(capital=10000.0))
    from kestrel.engine.ledger import Armed

    for k, session in enumerate(u.sessions):
        pe.open_session(session)
        if k == 0:
            pe.arm("AAA", plan("PLAN p FOR 3d\nWHEN pos == 0: BUY 1 MKT"))
            pe.run(session.open_ns + 5 * 60 * S)
            pe.stand_down("AAA")
        pe.close_session()
    assert sum(1 for _, e in pe.ledger.entries if isinstance(e, Armed)) == 1


def test_a_refused_plan_leaves_nothing_and_a_later_rerun_on_the_reference_still_agrees() -> None:
    """A plan the engine refuses (a window longer than the session, looking back over the session
    alone) is not armed; the session then falls back to the reference (a funding rejection) and
    replays without it."""
    from kestrel.engine.plans import PlanError

    u = _universe(ROWS)
    runs = []
    for path in ("auto", "reference"):
        pe = PortfolioEngine(u, {s: EngineConfig() for s in u.symbols},
                             PortfolioBounds(capital=2000.0, lookback="session"))
        pe.open_session(SESSION)
        with pytest.raises(PlanError):
            pe.arm("AAA", plan("PLAN long\nWHEN last > high(8h): BUY 1 MKT"))
        pe.arm("AAA", plan("PLAN a\nWHEN pos == 0: BUY 30 MKT"))
        pe.close_session(path)
        runs.append(pe)
    assert runs[0].paths == ["reference"] and _rejects(runs[0], "AAA")[0].startswith("cannot fund")
    assert runs[0].ledger.to_jsonl() == runs[1].ledger.to_jsonl()


MINUTE_TRADES = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
MINUTE_QUOTES = "equities_minute/lean_us_equities_minute_quote_bars_20131004_20131011.parquet"


def test_the_minute_universe_gives_the_same_ledger_on_both_paths(shared_data: Path) -> None:
    """SPY, AIG, BAC and IBM trade and quote bars joined: an SMA cross on each symbol over the
    sessions with a tight account (funding and max open positions bind)."""
    u = load_universe(shared_data / MINUTE_TRADES, quotes=shared_data / MINUTE_QUOTES).universe
    text = ("PLAN x\nWHEN mid CROSSES ABOVE sma(mid, 20) AND pos == 0: BUY 50 MKT STOP -0.3% TARGET +0.5%\n"
            "WHEN mid CROSSES BELOW sma(mid, 20) AND pos > 0: FLAT")
    plans = {s: plan(text) for s in u.symbols}
    cfg = {s: EngineConfig(maxpos=100, maxorders=200) for s in u.symbols}
    bounds = PortfolioBounds(capital=12000.0, max_open=2)
    ref = run_universe(u, cfg, bounds, plans, path="reference")
    auto = run_universe(u, cfg, bounds, plans, path="auto")
    assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl()
    reasons = {e.reason.split(":")[0] for _, e in ref.ledger.entries if isinstance(e, OrderRejected)}
    assert {"cannot fund", "max open positions 2 reached"} <= reasons
    assert sum(1 for _, e in ref.ledger.entries if isinstance(e, Filled)) > 20


# ---------------------------------------------------------------- sizing by money and by equity
@pytest.mark.parametrize("path", ["reference", "auto"])
def test_an_entry_sized_by_money_buys_the_whole_lots_it_pays_for(path: str) -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: BUY $1000 MKT",
                          "CCC": "PLAN c\nWHEN pos == 0: BUY $50 LMT 20.05"},
                      PortfolioBounds(capital=10000.0), path=path)
    buys = [(s, e.qty) for s, e in pe.ledger.entries if isinstance(e, Filled) and e.side == "buy"]
    assert buys == [("AAA", 9), ("CCC", 2)]  # 1000 // 100.02 = 9 (the touch); 50 // 20.05 = 2 (the limit)


def test_an_entry_sized_under_one_lot_is_rejected_with_its_reason() -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: BUY $50 MKT"}, PortfolioBounds(capital=10000.0))
    assert _rejects(pe, "AAA") == ["$50 buys less than one lot at 100.02"]


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_an_entry_sized_by_a_share_of_equity(path: str) -> None:
    u = _universe(ROWS)
    pe = _one_session(u, {"AAA": "PLAN a\nWHEN pos == 0: BUY 25%EQ MKT",
                          "BBB": "PLAN b\nWHEN pos == 0: BUY 25%EQ MKT"},
                      PortfolioBounds(capital=10000.0), path=path)
    buys = [(s, e.qty) for s, e in pe.ledger.entries if isinstance(e, Filled) and e.side == "buy"]
    # 2500 // 100.02 = 24; then equity 10000 - 24 x 0.02 (AAA marked at its bid): 2499.88 // 50.02 = 49
    assert buys == [("AAA", 24), ("BBB", 49)]
    assert pe.paths == ["reference"]


def test_a_single_symbol_engine_refuses_equity_sizing() -> None:
    e = Engine(EngineConfig(), SESSION, "TEST", 0.01)
    e.arm(plan("PLAN a\nWHEN pos == 0: BUY 10%EQ MKT"))
    e.run(Ticks.from_arrays(np.array([T0, T0 + S], np.int64), np.array([10.0, 10.0]), np.array([10.01, 10.01]),
                            np.array([10.0, 10.0]), np.zeros(2)), path="reference")
    assert [x.reason for x in e.ledger.events if isinstance(x, OrderRejected)][0] == (
        "sizing by a share of equity (10%EQ) needs an account: trade in a portfolio session")
