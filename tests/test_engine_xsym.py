"""Cross-symbol reads in the portfolio engine: a plan ON one symbol reading another's series
(`SPY.last`, `SPY.chg(1m)`) sees that symbol's ticks strictly before its own tick in the merged
order (by time, at equal time in universe order), is undefined until the other symbol has
ticked, never sees data after its tick (look-ahead), and the auto path gives the reference's
ledger bytes."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.engine import Engine, EngineConfig
from kestrel.engine.ledger import Filled, OrderPlaced
from kestrel.engine.plans import PlanError
from kestrel.engine.portfolio import PortfolioEngine, run_universe
from kestrel.market.data import MarketData
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe

from engine_helpers import SESSION, T0, S, plan
from xsym_cases import random_xsym_run

BIG = PortfolioBounds(capital=1e12, max_gross=1e6)
CFG = EngineConfig()


def _universe(rows: dict[str, list[tuple[int, float]]]) -> Universe:
    """Symbols over SESSION from (seconds after the open, last) rows; bid = last - 0.01,
    ask = last + 0.01."""
    members = []
    for s in sorted(rows):
        r = rows[s]
        last = np.array([x[1] for x in r])
        ticks = Ticks.from_arrays(np.array([T0 + x[0] * S for x in r], np.int64), last - 0.01, last + 0.01, last,
                                  np.ones(len(r)))
        data = MarketData(s, 0.01, ticks, (SESSION,))
        members.append(Member(s, data, data, Decimal(1)))
    return Universe(tuple(members), (SESSION,), "XNYS")


def _run(u: Universe, plans: dict[str, str], path: str = "reference") -> PortfolioEngine:
    return run_universe(u, {s: CFG for s in u.symbols}, BIG, {s: plan(t) for s, t in plans.items()}, path=path)


def _fills(pe: PortfolioEngine, symbol: str) -> list[tuple[int, int]]:
    """(the symbol's tick index, ts in seconds after the open) of each of its fills."""
    return [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries if s == symbol and isinstance(e, Filled)]


# ---------------------------------------------------------------- hand-computed
@pytest.mark.parametrize("path", ["reference", "auto"])
def test_a_cross_above_fires_at_the_readers_tick_after_the_other_symbols_tick(path: str) -> None:
    """AAPL ticks at 1 2 3 4 s, SPY at 1 (499) and 3 (501). At AAPL's tick at 3 s, SPY's tick
    of the same second sorts after AAPL: unseen, SPY.last is still 499; at 4 s it is 501, so
    SPY.last crosses above 500 there: AAPL's fourth tick (index 3)."""
    u = _universe({"AAPL": [(1, 100.0), (2, 100.0), (3, 100.0), (4, 100.0), (5, 100.0)],
                   "SPY": [(1, 499.0), (3, 501.0), (5, 502.0)]})
    pe = _run(u, {"AAPL": "PLAN p ON AAPL\nWHEN SPY.last CROSSES ABOVE 500: BUY 10 MKT"}, path)
    placed = [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries if s == "AAPL" and isinstance(e, OrderPlaced) and e.role == "entry"]
    assert placed == [(3, 4)]
    assert _fills(pe, "AAPL")[0][1] >= 4


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_a_symbol_sorting_first_is_seen_at_the_same_instant(path: str) -> None:
    """The same ticks with the read symbol sorting first (AAA read by ZZZ): AAA's tick at 3 s
    comes before ZZZ's at 3 s in the merged order, so ZZZ's third tick (index 2) sees it."""
    u = _universe({"ZZZ": [(1, 100.0), (2, 100.0), (3, 100.0), (4, 100.0)],
                   "AAA": [(1, 499.0), (3, 501.0)]})
    pe = _run(u, {"ZZZ": "PLAN p ON ZZZ\nWHEN AAA.last CROSSES ABOVE 500: BUY 10 MKT"}, path)
    placed = [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries if s == "ZZZ" and isinstance(e, OrderPlaced) and e.role == "entry"]
    assert placed == [(2, 3)]


def test_a_read_is_undefined_until_the_other_symbol_has_ticked() -> None:
    """`SPY.last > 0` is true at every tick once SPY has ticked: it fires at AAPL's first tick
    after SPY's first (at 3 s, AAPL's index 2), not before."""
    u = _universe({"AAPL": [(1, 100.0), (2, 100.0), (4, 100.0), (5, 100.0)], "SPY": [(3, 400.0)]})
    pe = _run(u, {"AAPL": "PLAN p ON AAPL\nWHEN SPY.last > 0: BUY 10 MKT"})
    placed = [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries if s == "AAPL" and isinstance(e, OrderPlaced) and e.role == "entry"]
    assert placed == [(2, 4)]


def test_an_indicator_of_another_symbol_is_fed_that_symbols_ticks() -> None:
    """SPY.sma(last,2) over SPY's ticks 100 (1 s), 103 (2 s), 110 (3 s). AAPL's tick at 2 s sees
    SPY's tick at 1 s only (SPY's at 2 s sorts after AAPL's): undefined, one tick of two; at 4 s
    it is (103 + 110) / 2 = 106.5, so `> 101` first holds at AAPL's second tick (index 1)."""
    u = _universe({"AAPL": [(2, 50.0), (4, 50.0), (6, 50.0)], "SPY": [(1, 100.0), (2, 103.0), (3, 110.0)]})
    pe = _run(u, {"AAPL": "PLAN p ON AAPL\nWHEN SPY.sma(last,2) > 101: BUY 10 MKT"})
    placed = [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries if s == "AAPL" and isinstance(e, OrderPlaced) and e.role == "entry"]
    assert placed == [(1, 4)]


def test_a_read_of_the_plans_own_symbol_is_the_plain_read() -> None:
    u = _universe({"AAPL": [(1, 100.0), (2, 101.0), (3, 102.0)], "SPY": [(1, 400.0)]})
    own = _run(u, {"AAPL": "PLAN p ON AAPL\nWHEN AAPL.last > 100.5: BUY 10 MKT"})
    plain = _run(u, {"AAPL": "PLAN p ON AAPL\nWHEN last > 100.5: BUY 10 MKT"})
    assert own.ledger.to_jsonl() == plain.ledger.to_jsonl()
    assert _fills(own, "AAPL")


def test_a_single_symbol_engine_refuses_a_read_of_another_symbol() -> None:
    engine = Engine(CFG, SESSION, "AAPL", 0.01)
    with pytest.raises(PlanError, match="reads SPY.*alone"):
        engine.arm(plan("PLAN p ON AAPL\nWHEN SPY.last > 1: BUY 1 MKT"))


def test_a_portfolio_refuses_a_read_of_a_symbol_outside_the_universe() -> None:
    u = _universe({"AAPL": [(1, 100.0)], "SPY": [(1, 400.0)]})
    pe = PortfolioEngine(u, {s: CFG for s in u.symbols}, BIG)
    pe.open_session(SESSION)
    with pytest.raises(PlanError, match="reads QQQ.*AAPL, SPY"):
        pe.arm("AAPL", plan("PLAN p ON AAPL\nWHEN QQQ.last > 1: BUY 1 MKT"))


def test_a_plan_armed_mid_session_reads_the_other_symbols_ticks_so_far() -> None:
    """Armed at 3.5 s after a run to 3 s: SPY's ticks so far (10 at 1 s, 20 at 3 s) are in its
    read, so `SPY.sma(last,2) >= 15` holds at AAPL's next tick (4 s, index 3)."""
    u = _universe({"AAPL": [(1, 50.0), (2, 50.0), (3, 50.0), (4, 50.0)], "SPY": [(1, 10.0), (3, 20.0), (9, 5.0)]})
    for path in ("auto", "reference"):
        pe = PortfolioEngine(u, {s: CFG for s in u.symbols}, BIG)
        pe.open_session(SESSION)
        pe.run(T0 + 3 * S, path)
        pe.arm("AAPL", plan("PLAN p ON AAPL\nWHEN SPY.sma(last,2) >= 15: BUY 1 MKT"), T0 + 3 * S)
        pe.close_session(path)
        placed = [(e.tick, (e.ts - T0) // S) for s, e in pe.ledger.entries
                  if s == "AAPL" and isinstance(e, OrderPlaced) and e.role == "entry"]
        assert placed == [(3, 4)], path


# ---------------------------------------------------------------- look-ahead
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_editing_the_other_symbols_later_ticks_never_changes_what_the_plan_did_up_to_a_tick(
        seed: int, reader_first: bool) -> None:
    """A's plan reads B. Any edit of B's ticks after A's tick k in the merged order (B's ticks
    later in time, and B's ticks at A's instant when B sorts after A) leaves A's events up to
    its tick k unchanged."""
    rng = random.Random(seed)
    a, b = ("AAA", "BBB") if reader_first else ("BBB", "AAA")
    secs_a = sorted(rng.sample(range(1, 120), 40))
    secs_b = sorted(rng.sample(range(1, 120), 40))
    rows = {a: [(t, 100 + rng.randrange(-30, 30) / 10) for t in secs_a],
            b: [(t, 50 + rng.randrange(-30, 30) / 10) for t in secs_b]}
    text = rng.choice([
        f"PLAN p ON {a}\nWHEN {b}.last CROSSES ABOVE {b}.sma(last,3): BUY 5 MKT\nWHEN {b}.chg(5s) < -1%: SELL 5 MKT",
        f"PLAN p ON {a}\nWHEN {b}.mid > 50 AND last < 100: BUY 2 MKT x3\nWHEN {b}.rsi(3) < 40: FLAT",
        f"PLAN p ON {a}\nWHEN last / {b}.last > 2 AND {b}.vwap > 49.5: BUY 1 LMT bid x4\nWHEN {b}.zscore(last,4) > 1: FLAT",
    ])
    k = rng.randrange(len(secs_a))
    at = secs_a[k]
    edited = {a: rows[a], b: [(t, p if t < at or (t == at and b < a) else p + rng.randrange(-50, 50) / 10)
                              for t, p in rows[b]]}
    before = _run(_universe(rows), {a: text})
    after = _run(_universe(edited), {a: text})

    def upto(pe: PortfolioEngine) -> list[bytes]:
        return [line for line in pe.ledger.of(a).to_jsonl().splitlines()
                if int(line.split(b'"tick":')[1].split(b",")[0]) <= k]

    assert upto(before) == upto(after)


# ---------------------------------------------------------------- reference vs auto
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_reference_and_auto_agree_over_random_universes_with_cross_symbol_plans(seed: int) -> None:
    ref = random_xsym_run(random.Random(seed), "reference")
    auto = random_xsym_run(random.Random(seed), "auto")
    assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl(), seed


def test_the_cross_symbol_differential_reaches_fills_and_both_paths() -> None:
    """Over 30 seeds the random cross-symbol runs fill orders, and auto ran both its fast path
    (a session stretch with no cross-symbol plan armed) and the reference."""
    fills, paths = 0, set()
    for seed in range(30):
        auto = random_xsym_run(random.Random(seed), "auto")
        ref = random_xsym_run(random.Random(seed), "reference")
        assert auto.ledger.to_jsonl() == ref.ledger.to_jsonl(), seed
        fills += sum(isinstance(e, Filled) for _, e in auto.ledger.entries)
        paths |= set(auto.paths)
    assert fills > 20
    assert paths == {"fast", "reference"}
