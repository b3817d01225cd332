"""Built-in agents against the real language and frame: baseline, fixed, recorded, and the
runtime's interpretation of raw text."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel import lang
from kestrel.agents.baseline import BaselineAgent, BaselineConfig
from kestrel.agents.fixed import FixedAgent, PlanFileError
from kestrel.agents.recorded import RecordedAgent, ReplayError, turn_text
from kestrel.data.sample import load_sample
from kestrel.frame import Ordinal, freeze
from kestrel.lang import ast
from kestrel.session.capture import (
    CaptureError,
    CaptureHeader,
    CapturedTurn,
    decode_capture,
    encode_capture,
)
from kestrel.session.loop import AuthoringLoop, Kernel, LoopSettings
from kestrel.session.ports import interpret, probe, snapshot_ports
from kestrel.session.protocol import (
    AuthorRequest,
    Invalid,
    PassTurn,
    RequestView,
    StandDownTurn,
    Supersede,
    TurnReply,
)
from kestrel.session.drive import author_turn
from kestrel.agents.scripted import ScriptedAgent

ORB = "PLAN orb UNTIL 15:45 RISK maxpos 100\nWHEN last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"


def test_interpret_with_the_real_language() -> None:
    reply = interpret(ORB)
    assert isinstance(reply, TurnReply) and isinstance(reply.turn, Supersede)
    assert reply.turn.plan.name == "orb"
    assert interpret("PASS") == TurnReply(PassTurn())
    assert interpret('STANDDOWN "wide"') == TurnReply(StandDownTurn("wide"))
    view = interpret("VIEW scout: quote, bars(5m, 24) BUDGET 600")
    assert isinstance(view, RequestView) and view.reason == "scout" and view.view.budget == 600
    bad = interpret("PLAN x\nWHEN last > 30m: BUY 1 MKT")
    assert isinstance(bad, Invalid) and "line 2" in bad.error
    two = interpret("PASS\nPASS")
    assert isinstance(two, Invalid) and "one statement, got 2" in two.error


def _request(briefing: str, ordinal: str = "OPEN") -> AuthorRequest:
    return AuthorRequest(ordinal=ordinal, iteration=0, briefing=briefing)


def _briefing(index: int, label: str, hour: int, minute: int) -> str:
    md = load_sample()
    s = md.sessions[-1]
    o = Ordinal(index, label, s.wall_clock_ns(hour, minute))
    snap = freeze(md, o.time_ns)
    return snapshot_ports(snap, o).briefing(None, _kernel())


def _kernel() -> Kernel:
    return Kernel("OPEN", 0, 3, 8000)


def test_baseline_writes_a_checked_orb_plan_at_open() -> None:
    text = BaselineAgent().write(_briefing(0, "OPEN", 9, 30))
    node = lang.parse(text)
    assert isinstance(node, ast.Plan) and node.name == "orb" and len(node.rules) == 2
    buy = node.rules[0].actions[0]
    sell = node.rules[1].actions[0]
    assert isinstance(buy, ast.Order) and isinstance(sell, ast.Order)
    assert (buy.side, sell.side) == ("buy", "sell")
    # brackets on the right sides; size risks at most 200 at the stop
    assert buy.stop is not None and buy.stop.value < 0 and buy.target is not None and buy.target.value > 0
    assert sell.stop is not None and sell.stop.value > 0
    assert buy.qty * abs(buy.stop.value) <= 200.0
    assert node.risk.maxpos == buy.qty


def test_baseline_is_deterministic_and_passes_later() -> None:
    b = _briefing(0, "OPEN", 9, 30)
    assert BaselineAgent().write(b) == BaselineAgent().write(b)
    assert BaselineAgent().write(_briefing(1, "11:00", 11, 0)) == "PASS"


def test_baseline_stands_down_out_of_range() -> None:
    wide = "CLOCK X #0 OPEN\nbid 100.00 ask 101.00 spr 1.00 last 100.50 sz 1\natr 0.40 rv 10.0%\n"
    assert BaselineAgent().write(wide).startswith('STANDDOWN "spread')
    wild = "CLOCK X #0 OPEN\nbid 100.00 ask 100.01 spr 0.01 last 100.00 sz 1\natr 5.00 rv 10.0%\n"
    assert BaselineAgent().write(wild).startswith('STANDDOWN "volatility')
    assert BaselineAgent().write("nothing").startswith("STANDDOWN")
    noatr = "CLOCK X #0 OPEN\nbid 100.00 ask 100.01 spr 0.01 last 100.00 sz 1\natr n/a rv n/a\n"
    assert BaselineAgent().write(noatr).startswith("STANDDOWN")


def test_fixed_agent_arms_then_passes(tmp_path: object) -> None:
    agent = FixedAgent(ORB, name="orb")
    assert agent.agent_id == "fixed:orb" and agent.iterative is False
    assert agent.author(_request("")).text == ORB
    assert agent.author(_request("", "11:00")).text == "PASS"
    with pytest.raises(ValueError, match="cannot read plan file"):
        FixedAgent.from_file("/nonexistent/plan.kes")


def test_fixed_agent_refuses_an_invalid_document_up_front(tmp_path: Path) -> None:
    # (replaces a test that let the invalid plan reach the session and stand it down: a user
    # expects the error, with its place, before anything runs)
    bad = tmp_path / "bad.kes"
    bad.write_text("PLAN x\nWHEN last > 30m: BUY 1 MKT\n")
    with pytest.raises(PlanFileError) as info:
        FixedAgent.from_file(bad)
    assert str(info.value).startswith(f"{bad}:2:11: cannot compare Price with Duration")
    assert "hint: a duration like 30m is only a window argument" in str(info.value)
    with pytest.raises(PlanFileError, match="holds a VIEW statement; a fixed plan file holds one PLAN"):
        FixedAgent("VIEW scout: quote")
    with pytest.raises(PlanFileError, match="holds 2 statements"):
        FixedAgent(ORB + "PASS\n")
    latin = tmp_path / "latin.kes"
    latin.write_bytes(b"PLAN caf\xe9\n")
    with pytest.raises(PlanFileError, match="not UTF-8 text"):
        FixedAgent.from_file(latin)


def test_fixed_agent_arms_at_every_sessions_open() -> None:
    agent = FixedAgent(ORB, name="orb")
    assert [agent.author(_request("", o)).text for o in ("OPEN", "11:00", "OPEN", "11:00")] == [
        ORB, "PASS", ORB, "PASS"
    ]


def test_turn_text_round_trips_through_the_language() -> None:
    plan = lang.parse(ORB)
    assert isinstance(plan, ast.Plan)
    for turn in (Supersede(plan), StandDownTurn('said "no" \\ twice'), PassTurn()):
        assert interpret(turn_text(turn)) == TurnReply(turn)


def test_recorded_agent_replays_in_order_and_fails_closed() -> None:
    plan = lang.parse(ORB)
    assert isinstance(plan, ast.Plan)
    turns = [
        CapturedTurn("2024-04-15", "OPEN", Supersede(plan), "baseline"),
        CapturedTurn("2024-04-15", "11:00", PassTurn(), "baseline"),
    ]
    agent = RecordedAgent(turns, agent_id="baseline")
    assert interpret(agent.author(_request("", "OPEN")).text) == TurnReply(Supersede(plan))
    with pytest.raises(ReplayError, match="next turn is for ordinal 11:00"):
        agent.author(_request("", "12:00"))
    with pytest.raises(ReplayError, match="1 captured turns were not replayed"):
        agent.assert_finished()
    assert agent.author(_request("", "11:00")).text.strip() == "PASS"
    with pytest.raises(ReplayError, match="past its end"):
        agent.author(_request("", "12:00"))


def test_capture_round_trip_and_errors() -> None:
    header = CaptureHeader("sample", "SAMPLE", ("2024-04-15",), ("OPEN",), 300, "baseline")
    turns = [CapturedTurn("2024-04-15", "OPEN", StandDownTurn("wide"), "baseline")]
    data = encode_capture(header, turns)
    assert data.splitlines()[0] == (
        b'{"record":"header","data":"sample","symbol":"SAMPLE","dates":["2024-04-15"],'
        b'"schedule":["OPEN"],"guard_s":300,"agent":"baseline","format":"kestrel-capture/2",'
        b'"source":null,"ledger_sha256":null,"engine":null}'
    )
    assert decode_capture(data) == (header, turns)
    with pytest.raises(CaptureError, match="starts with its header"):
        decode_capture(data.splitlines()[1])
    with pytest.raises(CaptureError, match="capture:1: not a capture record"):
        decode_capture(b"{oops}\n")
    with pytest.raises(CaptureError, match="empty capture"):
        decode_capture(b"")


def test_probe_judges_simple_conditions_at_the_cutoff() -> None:
    md = load_sample()
    s = md.sessions[-1]
    snap = freeze(md, s.wall_clock_ns(11, 0))
    last = float(snap.ticks.last[-1])
    above = ast.Compare(">", ast.Series("last"), ast.Number(last - 1.0))
    below = ast.Compare(">", ast.Series("last"), ast.Number(last + 1.0))
    assert probe(snap, above) is True and probe(snap, below) is False
    assert probe(snap, ast.And((above, below))) is False
    unknown = ast.Compare(">", ast.Series("vwap"), ast.Number(1.0))
    assert probe(snap, ast.And((above, unknown))) is None
    assert probe(snap, ast.Or((above, unknown))) is True


def test_probe_holds_a_window_undefined_until_the_session_has_run_its_length() -> None:
    # the engine keeps high(30m) undefined until 30 minutes after the session's first tick
    # (09:30): at the 09:50 ordinal (cutoff 09:45) the plan armed then cannot fire on it
    md = load_sample()
    s = md.sessions[-1]
    positive = ast.Compare(">", ast.Call("high", (ast.Duration(30, "m"),)), ast.Number(0.0))
    assert probe(freeze(md, s.wall_clock_ns(9, 50)), positive) is None
    assert probe(freeze(md, s.wall_clock_ns(10, 30)), positive) is True


def test_a_real_view_request_re_asks_under_the_same_snapshot() -> None:
    md = load_sample()
    s = md.sessions[-1]
    o = Ordinal(1, "11:00", s.wall_clock_ns(11, 0))
    snap = freeze(md, o.time_ns)
    loop = AuthoringLoop(ordinal="11:00", ports=snapshot_ports(snap, o), settings=LoopSettings())
    agent = ScriptedAgent(["VIEW scout: quote, tape(3) BUDGET 200", "VIEW x: orderbook", "PASS"])
    done = author_turn(loop, agent)
    agent.assert_finished()
    assert done.turn == PassTurn()
    second, third = agent.requests[1].briefing, agent.requests[2].briefing
    assert "VIEW scout budget 200" in second and "TAPE last 3" in second
    assert "BUDGET 2 view requests or repairs left" in second
    assert "VIEW default" in third and agent.requests[2].repair_error is not None
    assert "unknown pane 'orderbook'" in agent.requests[2].repair_error
    assert loop.evidence[0].panes == ("quote", "tape") and loop.evidence[0].view_budget == 200
    # same snapshot: the quote pane reads identically in the first and second briefings
    q1 = agent.requests[0].briefing.split("QUOTE", 1)[1].split("\n\n", 1)[0]
    q2 = second.split("QUOTE", 1)[1].split("\n\n", 1)[0]
    assert q1 == q2


def test_baseline_trades_inside_the_session_it_reads() -> None:
    fx = (
        "CLOCK EURUSD #0 OPEN cutoff 23:55:00 session 2014-05-13 00:00-00:00 UTC\n"
        "bid 1.39000 ask 1.39010 spr 0.00010 last 1.39005 sz 0\natr 0.00020 rv 5.0%\n"
    )
    node = lang.parse(BaselineAgent().write(fx))
    assert isinstance(node, ast.Plan)
    assert node.expiry == ast.Until(ast.TimeOfDay(23, 45))
    cond = node.rules[0].cond
    assert isinstance(cond, ast.And)
    assert cond.operands[0] == ast.Compare(">=", ast.Series("time"), ast.TimeOfDay(0, 30))


def test_a_mode_restricts_the_panes_an_agent_may_request() -> None:
    md = load_sample()
    o = Ordinal(1, "11:00", md.sessions[-1].wall_clock_ns(11, 0))
    ports = snapshot_ports(freeze(md, o.time_ns), o, allowed_panes=("quote", "bars"))
    view = interpret("VIEW v: quote, tape(3)")
    assert isinstance(view, RequestView)
    with pytest.raises(ValueError, match="pane 'tape' is not allowed in this mode; allowed panes: quote, bars"):
        ports.resolve_view(view.view)
    ok = interpret("VIEW v: quote, bars(5m, 6)")
    assert isinstance(ok, RequestView)
    ports.resolve_view(ok.view)


def _open_briefing(last: str, spread: str, atr: str) -> str:
    bid = last
    return (
        "CLOCK X #0 OPEN cutoff 09:25:00 session 2024-04-15 09:30-16:00 America/New_York\n"
        f"bid {bid} ask {bid} spr {spread} last {last} sz 1\natr {atr} rv 10.0%\n"
    )


def _order(text: str) -> tuple[ast.Plan, ast.Order]:
    node = lang.parse(text)
    assert isinstance(node, ast.Plan)
    order = node.rules[0].actions[0]
    assert isinstance(order, ast.Order)
    return node, order


@pytest.mark.parametrize(
    ("last", "spread", "atr", "qty", "stop"),
    [
        # equity: stop 2 x 0.39 = 0.78; 0.5 x 400 / 0.78 = 256.4 -> 256 shares
        ("188.71", "0.01", "0.39", 256, 0.78),
        # EUR/USD: 2 x ATR = 0.00024 would sit inside the spread the plan may enter at
        # (3 x 0.00010); the floor is 2 x 0.00030 = 0.0006: 200 / 0.0006 = 333333.3 -> 333333
        ("1.37155", "0.00010", "0.00012", 333_333, 0.0006),
        # BTC: stop 2 x 60 = 120; 200 / 120 = 1.67 -> 1 unit
        ("38317.000", "0.500", "60.000", 1, 120.0),
        # exact quotient: stop 2 x 0.125 = 0.25; 200 / 0.25 = 800 (not 799)
        ("100.000", "0.010", "0.125", 800, 0.25),
    ],
)
def test_baseline_sizes_by_risk_on_any_instrument(
    last: str, spread: str, atr: str, qty: int, stop: float
) -> None:
    plan, buy = _order(BaselineAgent().write(_open_briefing(last, spread, atr)))
    assert buy.qty == qty and plan.risk.maxpos == qty and plan.risk.maxloss == 400
    assert buy.stop == ast.Offset("abs", -stop)


def test_baseline_size_is_capped_by_maxpos_and_stands_down_when_one_unit_is_too_much() -> None:
    capped = BaselineAgent(BaselineConfig(maxpos=200_000))
    _, buy = _order(capped.write(_open_briefing("1.37155", "0.00010", "0.00012")))
    assert buy.qty == 200_000  # 333,333 by risk, capped
    # BTC: stop 2 x 120 = 240 > 0.5 x 400
    text = BaselineAgent().write(_open_briefing("38317.000", "0.500", "120.000"))
    assert text == 'STANDDOWN "a single unit risks 240 at the stop, more than the per-trade budget 200"'
    # a bigger budget trades it: 0.5 x 1000 / 240 = 2.08 -> 2
    _, buy = _order(BaselineAgent(BaselineConfig(maxloss=1000)).write(_open_briefing("38317.000", "0.500", "120.000")))
    assert buy.qty == 2
    with pytest.raises(ValueError, match="risk_fraction in"):
        BaselineConfig(risk_fraction=1.5)


def test_baseline_on_real_eurusd_quotes_risks_its_budget(shared_data: Path) -> None:
    from kestrel.data import load
    from kestrel.session.runner import SessionOptions, run_session

    from kestrel.engine import EngineConfig

    data = load(shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140506.csv").data
    # the file's 2014-05-06 session (the default is 2014-05-05, the most covered, whose data
    # starts 3 h after its open: no snapshot at OPEN) has quotes at its open
    import datetime as dt

    day = dt.date(2014, 5, 6)
    # the default operator cap scales with the instrument: 100 x maxloss (100,000 USD) of EUR
    # at the file's first quote, to two figures of units; the baseline sizes within it
    mid = (float(data.ticks.bid[0]) + float(data.ticks.ask[0])) / 2
    cap = int(100_000 / mid) // 1000 * 1000
    assert 70_000 < cap < 75_000  # EUR/USD near 1.39
    capped = run_session(data, BaselineAgent(), SessionOptions(), date=day).days[0].outcomes[0].turn
    assert isinstance(capped, Supersede) and capped.plan.risk.maxpos == cap
    assert all(o.qty <= cap for r in capped.plan.rules for o in r.actions if isinstance(o, ast.Order))
    # an operator who allows FX sizes gets a plan sized by risk
    result = run_session(data, BaselineAgent(), SessionOptions(engine=EngineConfig(maxpos=1_000_000)), date=day)
    turn = result.days[0].outcomes[0].turn
    assert isinstance(turn, Supersede)
    _, buy = _order(lang.format(turn.plan))
    assert buy.stop is not None
    risk = buy.qty * abs(buy.stop.value)
    # sized by risk: the stop loses at most 200 and within one unit's stop of it
    assert 200 - abs(buy.stop.value) < risk <= 200
    assert buy.qty > 100_000


def test_baseline_names_which_volatility_bound_failed() -> None:
    calm_atr_wild_rv = _open_briefing("100.00", "0.01", "0.20").replace("rv 10.0%", "rv 95.0%")
    assert BaselineAgent().write(calm_atr_wild_rv) == (
        'STANDDOWN "volatility out of range (realized vol 95% over 80%)"'
    )
    # atr 2.00 of 100.00 = 2% > 1%
    assert BaselineAgent().write(_open_briefing("100.00", "0.01", "2.00")) == (
        'STANDDOWN "volatility out of range (atr 2.000% of price, allowed 0.005-1%)"'
    )
