"""Engine API: warm-up on mid-session arming, path choice, config and plan errors, the
ledger summary and its canonical serialization."""

from __future__ import annotations

import msgspec
import pytest

from kestrel.engine import (
    Engine,
    EngineConfig,
    Filled,
    Ledger,
    Mark,
    PlanError,
    PositionChanged,
    ticks_of,
)
from kestrel.engine.ledger import Fired
from kestrel.lang import ast

from engine_helpers import SESSION, S, T0, engine, fills, plan, quotes, run


def test_plan_armed_mid_session_warms_its_indicators_on_history() -> None:
    e = engine()
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (101.0, 101.0), (100.5, 100.5))))
    e.arm(plan("PLAN p\nWHEN last > high(3s): BUY 1 MKT"))
    e.on_ticks(ticks_of([(T0 + 3 * S, 101.5, 101.5)]))
    # window [0s, 3s) from the history holds 100, 101, 100.5: 101.5 > 101 fires at tick 3
    assert [(f.tick, f.rule) for f in e.ledger.events if isinstance(f, Fired)] == [(3, 0)]


def test_vwap_and_open_come_from_the_whole_session() -> None:
    for path in ("reference", "fast"):
        e = engine()
        e.on_ticks(ticks_of(quotes((90.0, 90.0), (110.0, 110.0))))
        e.arm(plan("PLAN p\nWHEN last > open + 3 AND last < vwap: SELL 1 MKT"))
        # open is the session's first last (90): 94 > 93. Taken from the first tick after
        # arming (94) or the latest before it (110) it would be false. vwap (no volume) is the
        # mean of every last of the session (90, 110, 94) = 98 > 94; over the ticks since
        # arming it would be 94, and 94 < 94 is false.
        e.run(ticks_of([(T0 + 2 * S, 94.0, 94.0)]), path=path, final=False)
        assert [(f.tick, f.rule) for f in e.ledger.events if isinstance(f, Fired)] == [(2, 0)]


def test_run_picks_the_fast_path_for_static_plans() -> None:
    rows = quotes((100.0, 100.0), (101.0, 101.0), (102.0, 102.0))
    e = engine()
    e.arm(plan("PLAN p\nWHEN last > 100: BUY 1 MKT"))
    e.run(ticks_of(rows))
    assert e.last_path == "fast"
    assert fills(e.ledger)[0] == (2, "buy", 1, 102.0)


def test_plans_reading_pos_run_on_both_paths_alike() -> None:
    rows = quotes((101.0, 101.0), (101.0, 101.0), (99.0, 99.0), (101.0, 101.0), (101.0, 101.0))
    text = ("PLAN p RISK maxpos 5\nWHEN pos == 0 AND last > 100: BUY 1 MKT x3\n"
            "WHEN pos > 0 AND last < 100: FLAT")
    out = []
    for path in ("reference", "fast"):
        e = engine()
        e.arm(plan(text))
        e.run(ticks_of(rows), path=path, final=False)
        assert e.last_path == path
        # buy fired t0 (fills t1); t1 pos 1 -> waits for a false evaluation; flat fired at
        # t2 (fills t3 @101); t3: pos == 0 AND last > 100 again -> second buy, fills t4
        assert fills(e.ledger) == [(1, "buy", 1, 101.0), (3, "sell", 1, 101.0), (4, "buy", 1, 101.0)]
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]


def test_plans_reading_upnl_run_on_the_reference_path() -> None:
    rows = quotes((101.0, 101.0), (101.0, 101.0))
    e = engine()
    e.arm(plan("PLAN p\nWHEN upnl < -5: FLAT"))
    assert not e.fast_applies()
    e.run(ticks_of(rows))
    assert e.last_path == "reference"
    e2 = engine()
    e2.arm(plan("PLAN p\nWHEN upnl < -5: FLAT"))
    with pytest.raises(PlanError, match="upnl or pnl"):
        e2.run(ticks_of(rows), path="fast")


def test_ticks_without_a_plan_run_the_broker_only() -> None:
    e = engine()
    events = e.on_ticks(ticks_of(quotes((100.0, 100.0), (101.0, 101.0))))
    assert events == [] and e.seen == 2


def test_unknown_function_in_a_hand_built_plan_fails_closed() -> None:
    bad = ast.Plan("p", (ast.Rule(ast.Compare(">", ast.Series("last"), ast.Call("hihg", (ast.Duration(1, "m"),))),
                                  (ast.Order("buy", 1, "mkt"),)),))
    with pytest.raises(PlanError, match="fails the checker: unknown function `hihg`"):
        engine().arm(bad)


@pytest.mark.parametrize(
    ("cond", "message"),
    [
        ("last > high(1d)", r"high\(\.\.\.\) looks back 1440m, longer than the session \(390m\)"),
        ("chg(7h) > 1%", r"chg\(\.\.\.\) looks back 420m, longer than the session \(390m\)"),
        ("mid > sma(mid, 40, 10m)", r"sma\(\.\.\.\) looks back 400m, longer than the session \(390m\)"),
        ("atr(400) > 1", r"atr\(\.\.\.\) looks back 400m, longer than the session \(390m\)"),
    ],
)
def test_a_window_longer_than_the_session_is_refused_at_arm(cond: str, message: str) -> None:
    # The engine evaluates one 09:30-16:00 session: such a rule could never be defined.
    e = engine()
    with pytest.raises(PlanError, match=message):
        e.arm(plan(f"PLAN w\nWHEN {cond}: BUY 1 MKT"))
    assert len(e.ledger) == 0  # nothing armed, nothing recorded


def test_windows_within_the_session_arm() -> None:
    e = engine()
    e.arm(plan("PLAN w\nWHEN last > high(390m) AND mid > sma(mid, 39, 10m) AND sma(mid, 5000) > 0: BUY 1 MKT"))
    assert e.armed


def test_bad_config_fails_closed() -> None:
    # a bad config cannot be built: the Struct validates itself (construction and decoding)
    with pytest.raises(ValueError, match=r"slippage_ticks=-1 is invalid: Expected `float` >= 0"):
        EngineConfig(slippage_ticks=-1)
    # built in code, every field is held to its declared type as decoding would hold it: a
    # misspelt end_of_day would otherwise carry a position the operator meant to flatten
    with pytest.raises(ValueError, match=r"end_of_day='Flatten' .* \(one of 'flatten', 'carry'\)"):
        EngineConfig(end_of_day="Flatten")  # type: ignore[arg-type]
    wrong: dict[str, object] = {"maxpos": 1.5, "maxorders": True, "latency_ns": 0.5,
                                "money_decimals": 2.5, "partial_fills": "no", "latency_ticks": "1"}
    for field, value in wrong.items():
        with pytest.raises(ValueError, match=f"EngineConfig: {field}="):
            EngineConfig(**{field: value})  # type: ignore[arg-type]
    assert EngineConfig(maxloss=5).maxloss == 5  # an int where a float is declared is fine
    with pytest.raises(ValueError, match="tick_size"):
        Engine(EngineConfig(), SESSION, "X", 0.0)
    nan = float("nan")
    bad: dict[str, float] = {"maxloss": nan, "fee_per_unit": nan, "slippage_ticks": float("inf"),
                             "multiplier": nan, "maxpos": 0, "maxorders": -1, "latency_ns": -5,
                             "session_maxloss": float("inf")}
    for field, value in bad.items():
        with pytest.raises(ValueError, match=field):
            EngineConfig(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tick_size"):
        Engine(EngineConfig(), SESSION, "X", nan)


def test_config_decoding_validates_the_bounds() -> None:
    ok = msgspec.json.decode(b'{"maxpos": 5, "fee_per_unit": 0.01}', type=EngineConfig)
    assert (ok.maxpos, ok.fee_per_unit, ok.maxloss) == (5, 0.01, 1000.0)
    assert ok.validated() is ok
    for doc, where in ((b'{"maxpos": 0}', "maxpos"), (b'{"latency_ns": -1}', "latency_ns"),
                       (b'{"money_decimals": 12}', "money_decimals"),
                       (b'{"end_of_day": "hold"}', "end_of_day")):
        with pytest.raises(msgspec.ValidationError, match=where):
            msgspec.json.decode(doc, type=EngineConfig)
    with pytest.raises(msgspec.ValidationError, match="multiplier must be a finite number > 0"):
        msgspec.convert({"multiplier": float("inf")}, EngineConfig)


def test_unknown_path_fails_closed() -> None:
    e = engine()
    e.arm(plan("PLAN p\nWHEN last > 100: BUY 1 MKT"))
    with pytest.raises(ValueError, match="path must be auto, reference or fast"):
        e.run(ticks_of(quotes((100.0, 100.0))), path="quick")


def test_summary_figures_by_hand() -> None:
    # trade 1: buy 10 @100 (t1), target +2% -> sell @102 (t3): +20, fees 2 -> net +18 (win)
    # trade 2: rule 1 fires at t3, buys 10 @102 at t4; stop -1% = 100.98, on the 0.25 grid
    # 101.0; bid 101.25 at t5 holds, bid 100 at t6 fills: -20
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (102.0, 102.0),
                  (102.0, 102.0), (101.25, 101.25), (100.0, 100.0), (100.0, 100.0))
    e = run("PLAN p RISK maxpos 100 maxloss 1000\nWHEN last >= 100: BUY 10 MKT TARGET +2%\n"
            "WHEN last >= 102: BUY 10 MKT STOP -1%", rows, EngineConfig(fee_per_order=1.0))
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (3, "sell", 10, 102.0),
                               (4, "buy", 10, 102.0), (6, "sell", 10, 100.0)]
    s = e.ledger.summary()
    assert (s.trades, s.wins, s.win_rate) == (2, 1, 0.5)
    assert (s.realized_pnl, s.fees, s.net_pnl) == (0.0, 4.0, -4.0)
    # equity marks after each fill: -1; 20 - 2 = 18; 18 - 1 = 17; 0 - 4 = -4
    assert [m.equity for m in e.ledger.events if isinstance(m, Mark)] == [-1.0, 18.0, 17.0, -4.0]
    assert s.max_drawdown == 22.0
    assert s.exposure_ns == 2 * S + 2 * S
    assert (s.orders, s.fills) == (4, 4)


def test_jsonl_is_canonical_and_round_trips() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.25))
    e = run("PLAN p\nWHEN last >= 100: BUY 3 MKT", rows)
    text = e.ledger.to_jsonl()
    lines = text.decode().splitlines()
    assert lines[0] == (f'{{"event":"armed","tick":0,"ts":{T0},"plan":"p","rules":1,'
                        f'"expiry_ts":{SESSION.close_ns}}}')
    assert f'{{"event":"fill","tick":1,"ts":{T0 + S},"id":1,"side":"buy","qty":3,"price":100.25,"fee":0.0}}' in lines
    back = Ledger.from_jsonl(text)
    assert back.events == e.ledger.events
    assert any(isinstance(x, Filled) for x in back.events)
    assert any(isinstance(x, PositionChanged) for x in back.events)


def test_numpy_cumsum_accumulates_sequentially() -> None:
    """The fast path's exactness rests on np.cumsum adding left to right like the
    reference's running sums (no pairwise summation): pin it against a numpy upgrade."""
    import numpy as np

    rng = np.random.default_rng(5)
    x = rng.normal(100.0, 3.0, 100_000)
    acc = 0.0
    seq = []
    for v in x.tolist():
        acc += v
        seq.append(acc)
    assert np.cumsum(x).tolist() == seq


def test_malformed_batches_fail_closed() -> None:
    import numpy as np

    from kestrel.market.ticks import Ticks

    def raw(ts: list[int], bid: list[float]) -> Ticks:
        b = np.asarray(bid)
        return Ticks(np.asarray(ts, dtype=np.int64), b, b + 0.25, b, np.zeros(len(b)))

    e = engine()
    e.arm(plan("PLAN p\nWHEN last > 100: BUY 1 MKT"))
    with pytest.raises(ValueError, match="timestamps go backwards at row 1"):
        e.on_ticks(raw([T0 + S, T0], [100.0, 100.0]))
    with pytest.raises(ValueError, match="tick 1 of the batch has bid nan"):
        e.run(raw([T0, T0 + S], [100.0, float("nan")]))
    assert e.ledger.events[-1].__class__.__name__ == "Armed"  # nothing ran


def test_max_drawdown_counts_from_the_starting_equity() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (99.0, 99.0))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1.0", rows, EngineConfig(fee_per_order=1.0))
    # marks: -1 after the entry (fee), -12 after the stop (-10 and a second fee); the
    # equity was 0 before the trade, so the drawdown is 12, not 11
    assert [m.equity for m in e.ledger.events if isinstance(m, Mark)] == [-1.0, -12.0]
    assert e.ledger.summary().max_drawdown == 12.0
