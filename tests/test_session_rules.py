"""The rules of the game: every briefing states them (RULES), the one risk classification
reports an order a bound will reject before arming under every profile, the engine then
rejects exactly that order, and the next briefing says so; a custom agent reads the typed
snapshot instead of the text."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from kestrel.agents.scripted import ScriptedAgent
from kestrel.data import load_sample
from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Disarmed, Filled, OrderRejected
from kestrel.frame import TypedSnapshot
from kestrel.session import AgentReply, AuthorRequest, SessionOptions, run_session
from kestrel.session.loop import Evidence, LoopSettings
from kestrel.session.profiles import Flags, lookup, resolve
from kestrel.session.results import SessionResult

PROFILES = ("balanced", "fast", "thorough")
OPERATOR = EngineConfig(maxpos=1000)  # the bounds these tests read, stated (the default scales with the data)
REVIEW = {"balanced": "bound-check", "fast": "risk-review", "thorough": "self-correction"}


def options(profile: str | None, engine: EngineConfig = OPERATOR, checkpoints: tuple[str, ...] = ()
            ) -> SessionOptions:
    r = resolve(Flags(), None, lookup(profile) if profile else None)
    return SessionOptions(checkpoints=checkpoints, settings=LoopSettings.of(r.settings), policy=r.policy,
                          profile=r.profile, engine=engine)


def run(script: list[str], profile: str | None, engine: EngineConfig = OPERATOR,
        checkpoints: tuple[str, ...] = (), days: int = 1) -> tuple[SessionResult, list[Evidence], ScriptedAgent]:
    agent = ScriptedAgent(script)
    sink: list[Evidence] = []
    result = run_session(load_sample(), agent, options(profile, engine, checkpoints), sink=sink.append, days=days)
    agent.assert_finished()
    return result, sink, agent


def rejections(result: SessionResult) -> list[OrderRejected]:
    return [e for d in result.days for e in d.ledger.events if isinstance(e, OrderRejected)]


# (what breaks, the plan, the operator's config, the text the dry run reports, the engine's rejection)
BREAKS = [
    ("maxpos", "PLAN big\nWHEN time >= 10:00: BUY 1500 MKT STOP -0.1%", OPERATOR,
     "rule 1 (BUY 1500): size over maxpos 1000: the engine rejects it", "maxpos 1000: position would reach 1500"),
    ("maxloss", "PLAN loss RISK maxloss 100\nWHEN time >= 10:00: BUY 500 MKT STOP -1%", EngineConfig(),
     "rule 1 (BUY 500): worst-case loss", "past maxloss 100"),
    ("session_maxloss", "PLAN sess\nWHEN time >= 10:00: BUY 200 MKT STOP -1%", EngineConfig(session_maxloss=300.0),
     "reaches the session's loss room 300.00 (session_maxloss 300)", "past session maxloss 300"),
    ("maxorders", "PLAN many RISK maxorders 2\nWHEN time >= 10:00: BUY 1 MKT STOP -1%\n"
     "WHEN time >= 10:00: BUY 1 MKT STOP -1%\nWHEN time >= 10:00: BUY 1 MKT STOP -1%", EngineConfig(),
     "the plan can place 3 orders, over maxorders 2", "maxorders 2 reached"),
]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("bound", "plan", "engine", "finding", "rejected"), BREAKS, ids=[b[0] for b in BREAKS])
def test_an_order_a_bound_will_reject_is_reported_before_arming_under_every_profile(
    profile: str, bound: str, plan: str, engine: EngineConfig, finding: str, rejected: str
) -> None:
    # the agent insists: the plan is reported once, then armed as is, and the engine rejects it
    result, sink, agent = run([plan, plan], profile, engine)
    review = [e for e in sink if e.kind == REVIEW[profile]]
    assert len(review) == 1 and review[0].risk == "CRITICAL"
    assert review[0].error is not None and finding in review[0].error
    assert agent.requests[1].repair_error == review[0].error  # the agent was told, before arming
    assert result.days[0].outcomes[0].armed.startswith("armed ")
    reasons = [r.reason for r in rejections(result)]
    assert reasons and rejected in reasons[0]  # what the dry run said, the engine did


def test_an_order_past_maxpos_from_the_position_held_is_reported_too() -> None:
    opener = "PLAN open\nWHEN time >= 10:00: BUY 800 MKT STOP -3%"
    more = "PLAN more\nWHEN time >= 11:00: BUY 500 MKT STOP -3%"
    engine = EngineConfig(maxpos=1000, maxloss=10_000.0)
    for profile in PROFILES:
        result, sink, agent = run([opener, more, more], profile, engine, checkpoints=("11:00",))
        review = [e for e in sink if e.kind == REVIEW[profile]]
        assert [e.ordinal for e in review] == ["11:00"]
        assert review[0].error is not None and (
            "rule 1 (BUY 500): with the position long 800 it would reach 1300, over maxpos 1000" in review[0].error)
        assert [r.reason for r in rejections(result)] == ["maxpos 1000: position would reach 1300"]


NO_STOP = "PLAN naked\nWHEN time >= 10:00: BUY 1000 MKT"
CLEAN = "PLAN clean RISK maxpos 200 maxloss 400\nWHEN time >= 10:00: BUY 100 MKT STOP -0.6% TARGET +1.2%"


def test_the_same_plans_get_one_classification_under_every_profile() -> None:
    # a 1,000-share entry with no stop: CRITICAL for fast's trigger and thorough's self-check
    # alike, with the same reason; balanced reviews only what a bound rejects, and no bound does
    said: dict[str, list[tuple[str | None, str | None]]] = {}
    for profile in PROFILES:
        script = [NO_STOP] if profile == "balanced" else [NO_STOP, NO_STOP]
        _, sink, _ = run(script, profile)
        said[profile] = [(e.risk, e.error) for e in sink if e.kind in REVIEW.values()]
    reason = "rule 1 (BUY 1000): no protective STOP or TRAIL (only maxloss 1000 bounds its loss, by flattening)"
    assert said["balanced"] == []
    assert said["fast"] == [("CRITICAL", f"risk review: the plan is classified CRITICAL ({reason}). Revise it, or "
                                         "reply STANDDOWN or PASS.")]
    assert said["thorough"] == [("CRITICAL", f"self-correction: the plan is classified CRITICAL: {reason}. Correct "
                                             "the plan, or reply STANDDOWN or PASS.")]
    for profile in PROFILES:  # a clean plan passes everywhere, with no review and no re-ask
        _, sink, agent = run([CLEAN], profile)
        assert [e.kind for e in sink if e.kind in REVIEW.values()] == [] and len(agent.requests) == 1


# -- the RULES pane -----------------------------------------------------------------------------


def test_every_briefing_states_the_rules_and_the_next_one_the_rejections() -> None:
    engine = EngineConfig(maxpos=500, maxloss=2000.0, slippage_ticks=1, fee_per_order=1.0)
    big = "PLAN big\nWHEN time >= 10:00: BUY 800 MKT STOP -0.5%"
    result, _, agent = run([big, big, "PASS"], None, engine, checkpoints=("11:00",))
    first, _, at_eleven = (r.briefing.splitlines() for r in agent.requests)
    assert first[1:5] == [
        "RULES SAMPLE tick 0.01 mult 1 USD lot 1",
        "bounds maxpos 500 maxloss 2000 maxorders 50 session_maxloss none",
        "friction slippage 1 tick, fees 0/unit 1/order; eod flatten",
        "since last turn: none",
    ]
    assert first[0].endswith("; now 09:30, close in 6h30m")
    assert at_eleven[4:6] == [
        "since last turn: 1 rejected",
        "10:00:00 rejected big rule 1: maxpos 500: position would reach 800",
    ]
    typed = agent.requests[2].snapshot
    assert typed is not None and [(n.kind, n.rule, n.reason) for n in typed.notices] == [
        ("rejected", 1, "maxpos 500: position would reach 800")]


def test_notices_after_the_last_ordinal_open_the_next_session_dated() -> None:
    loss = "PLAN loss RISK maxloss 50\nWHEN time >= 10:00: BUY 100 MKT STOP -1%"
    result, _, agent = run([loss, loss, "PASS"], None, days=2)
    day2 = agent.requests[2].briefing.splitlines()
    assert day2[0].startswith("CLOCK SAMPLE #0 OPEN")
    events = [e for e in result.days[0].ledger.events if isinstance(e, (OrderRejected, Disarmed))]
    assert [type(e).__name__ for e in events] == ["OrderRejected", "Disarmed"]
    date = result.days[0].date[5:]  # mm-dd of the first session
    assert day2[4:7] == [
        "since last turn: 1 rejected, 1 disarmed",
        f"{date} 10:00:00 rejected loss rule 1: {events[0].reason}",
        f"{date} 10:00:00 disarmed loss: maxloss 50 would be breached",
    ]


def test_the_agents_own_stand_down_and_supersede_are_no_notices() -> None:
    script = ["PLAN a\nWHEN time >= 15:00: BUY 1 MKT STOP -1%", "PLAN b\nWHEN time >= 15:00: BUY 1 MKT STOP -1%",
              'STANDDOWN "done"', "PASS"]
    _, _, agent = run(script, None, checkpoints=("11:00", "12:00", "13:00"))
    for request in agent.requests:
        assert "since last turn: none" in request.briefing


# -- a custom agent reads the typed snapshot -----------------------------------------------------


class TypedAgent:
    """Sizes a breakout from the typed snapshot alone: the ask, the last bar's high, the bounds
    and the instrument; never parses the text."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False
    agent_id = "typed"
    model = ""

    def __init__(self) -> None:
        self.seen: list[TypedSnapshot] = []

    def author(self, request: AuthorRequest) -> AgentReply:
        snap = request.snapshot
        assert snap is not None
        self.seen.append(snap)
        if snap.clock.index != 0 or snap.quote is None:
            return AgentReply("PASS")
        risk = snap.bounds.maxloss / 4
        stop = round(snap.quote.ask * 0.005, 2)
        qty = min(snap.bounds.maxpos, int(risk / (stop * snap.instrument.multiplier)))
        qty -= qty % snap.instrument.min_qty
        high = max(b.high for b in snap.bars)
        return AgentReply(f"PLAN typed\nWHEN last > {high:.2f}: BUY {qty} MKT STOP -{stop:.2f}")


def test_a_custom_agent_reads_the_typed_snapshot_with_the_values_the_text_shows() -> None:
    agent = TypedAgent()
    result = run_session(load_sample(), agent, SessionOptions(checkpoints=("11:00",), engine=OPERATOR))
    assert [o.armed for o in result.days[0].outcomes] == ["armed typed", "kept typed"]
    open_, later = agent.seen
    assert open_.clock.label == "OPEN" and open_.clock.cutoff == "09:25:00" and open_.bars_tf_s == 1800
    assert later.clock.now == "11:00:00" and later.bars_tf_s == 300 and len(later.bars) == 12
    assert open_.bounds.maxpos == 1000 and open_.instrument.symbol == "SAMPLE" and open_.plan is None
    assert later.plan is not None and later.plan.startswith("PLAN typed")
    assert later.account.position >= 0
    # the typed snapshot and the briefing's text say the same numbers
    text = _briefing_at_open()
    quote = re.search(r"^bid (\S+) ask (\S+) spr (\S+) last (\S+)", text, re.MULTILINE)
    assert quote is not None and open_.quote is not None
    assert (open_.quote.bid, open_.quote.ask, open_.quote.spread, open_.quote.last) == tuple(
        float(quote.group(i)) for i in range(1, 5))
    bars = [line.split() for line in text.split("BARS 30m last 13")[1].splitlines()[2:15]]
    assert [(f"{b[0]} {b[1]}", float(b[3]), float(b[5])) for b in bars] == [
        (x.time, x.high, x.close) for x in open_.bars]
    # and it encodes canonically, as every message does
    assert msgspec.json.decode(msgspec.json.encode(open_), type=TypedSnapshot) == open_


def _briefing_at_open() -> str:
    agent = ScriptedAgent(["PASS"])
    run_session(load_sample(), agent, SessionOptions(engine=OPERATOR))
    return agent.requests[0].briefing


def test_a_single_shot_agents_plan_a_bound_will_reject_is_reported_in_the_evidence() -> None:
    from kestrel.agents.fixed import FixedAgent

    sink: list[Evidence] = []
    plan = "PLAN big\nWHEN time >= 10:00: BUY 1500 MKT STOP -0.1%"
    result = run_session(load_sample(), FixedAgent(plan, name="big"), SessionOptions(engine=OPERATOR), sink=sink.append)
    assert [(e.kind, e.error, e.reason) for e in sink] == [(
        "bound-check", "bound check: rule 1 (BUY 1500): size over maxpos 1000: the engine rejects it",
        "a single-shot agent is not asked again: the plan is armed as is")]
    assert [r.reason for r in rejections(result)] == ["maxpos 1000: position would reach 1500"]


def test_a_notice_of_the_evening_before_in_a_session_spanning_midnight_is_dated(shared_data: Path) -> None:
    # FX sessions run 17:00-17:00 New York: a rejection at 17:01 must not read as later than 11:00
    from kestrel.data import load

    data = load(shared_data / "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet").data
    big = "PLAN big UNTIL 16:00\nWHEN last > 0: BUY 100000 MKT STOP -0.5%"
    agent = ScriptedAgent([big, big, "PASS"])
    run_session(data, agent, options(None, checkpoints=("11:00",)), date=dt.date(2014, 5, 14))
    agent.assert_finished()
    at_eleven = agent.requests[2].briefing.splitlines()
    assert at_eleven[0].startswith("CLOCK EURUSD #1 11:00 cutoff 10:55:00 session 2014-05-14 17:00-17:00")
    assert at_eleven[4:6] == [
        "since last turn: 1 rejected",
        "05-14 17:01:35 rejected big rule 1: maxpos 1000: position would reach 100000",
    ]
    tape = at_eleven[at_eleven.index("TAPE last 5") + 2]
    assert re.match(r"10:54:\d\d ", tape)  # this morning's prints stay undated


def test_a_plan_the_engine_disarmed_is_no_incumbent_and_restating_it_arms_it_afresh() -> None:
    # expired at 10:00 before its rule could fire: at 11:00 the briefing shows no incumbent, and
    # the same text is a new arming that fires (kept, it would stay disarmed and do nothing)
    scalp = "PLAN scalp FOR 30m\nWHEN time >= 10:30: BUY 100 MKT STOP -2%"
    result, sink, agent = run([scalp, scalp, "PASS"], None, checkpoints=("11:00", "12:00"))
    at_eleven = agent.requests[1].briefing
    assert "since last turn: 1 disarmed" in at_eleven and "disarmed scalp: expired" in at_eleven
    assert "PLAN none" in at_eleven and "INCUMBENT" not in at_eleven
    outcomes = [o.armed for o in result.days[0].outcomes]
    assert outcomes == ["armed scalp", "armed scalp", "passed"]  # at 12:00 it has expired again
    assert [e.kind for e in sink if e.kind == "restated"] == []
    fills = [e for e in result.days[0].ledger.events if isinstance(e, Filled)]
    assert [(f.side, f.qty) for f in fills][:1] == [("buy", 100)]
