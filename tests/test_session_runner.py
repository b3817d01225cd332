"""`run_session`: the synchronous embedding end to end on the bundled sample."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from kestrel import lang
from kestrel.agents.baseline import BaselineAgent
from kestrel.agents.fixed import FixedAgent
from kestrel.agents.recorded import RecordedAgent
from kestrel.agents.scripted import ScriptedAgent
from kestrel.data.sample import load_sample
from kestrel.engine.ledger import Armed, Disarmed
from kestrel.market import MarketData
from kestrel.session.capture import decode_capture
from kestrel.session.loop import Evidence, LoopSettings
from kestrel.session.profiles import Flags, lookup, resolve
from kestrel.session.protocol import PassTurn, StandDownTurn, Supersede, Usage
from kestrel.session.runner import SessionError, SessionOptions, SessionResult, run_session
from kestrel.session.schedule import ScheduleError, ordinals

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
CHECKS = ("11:00", "13:30")


@pytest.fixture(scope="module")
def sample() -> MarketData:
    return load_sample()


def _baseline(sample: MarketData, **kw: object) -> SessionResult:
    return run_session(sample, BaselineAgent(), SessionOptions(checkpoints=CHECKS), **kw)  # type: ignore[call-overload, no-any-return]


def test_baseline_session_is_deterministic(sample: MarketData) -> None:
    a, b = _baseline(sample), _baseline(sample)
    assert a.ledger_jsonl() == b.ledger_jsonl() and a.capture_jsonl() == b.capture_jsonl()
    assert [o.ordinal for o in a.days[0].outcomes] == ["OPEN", "11:00", "13:30"]
    assert isinstance(a.days[0].outcomes[0].turn, Supersede)
    assert [o.turn for o in a.days[0].outcomes[1:]] == [PassTurn(), PassTurn()]
    first = a.days[0].ledger.events[0]
    # the OPEN turn is armed at its cutoff (09:25), before any session tick
    assert isinstance(first, Armed) and first.tick == 0 and first.plan == "orb"


def test_replay_of_the_capture_reproduces_ledger_and_capture(sample: MarketData) -> None:
    original = _baseline(sample)
    header, turns = decode_capture(original.capture_jsonl())
    assert header.schedule == ("OPEN", "11:00", "13:30") and header.agent == "baseline"
    replay = run_session(
        sample, RecordedAgent(turns, agent_id=header.agent), SessionOptions(checkpoints=CHECKS)
    )
    assert replay.ledger_jsonl() == original.ledger_jsonl()
    assert replay.capture_jsonl() == original.capture_jsonl()


def test_only_terminal_turns_are_captured_iterations_are_evidence(sample: MarketData) -> None:
    u = Usage(input=50, output=10)
    agent = ScriptedAgent(["VIEW scout: quote, tape(3)", "PLAN x", ORB, "PASS"], usage=u)
    sink: list[Evidence] = []
    result = run_session(sample, agent, SessionOptions(checkpoints=("11:00",)), sink=sink.append)
    agent.assert_finished()
    header, turns = decode_capture(result.capture_jsonl())
    assert [(t.ordinal, type(t.turn).__name__) for t in turns] == [
        ("OPEN", "Supersede"),
        ("11:00", "PassTurn"),
    ]
    assert [(e.ordinal, e.iteration, e.kind) for e in sink] == [
        ("OPEN", 0, "view-request"),
        ("OPEN", 1, "repair"),
    ]
    assert sink == result.evidence
    assert result.days[0].outcomes[0].iterations == 2 and result.days[0].outcomes[0].tokens_spent == 180
    # the ledger knows nothing of the iterations: one plan armed
    armed = [e for e in result.days[0].ledger.events if isinstance(e, Armed)]
    assert [e.plan for e in armed] == ["orb"]


def test_exhaustion_stands_the_session_down_never_a_forced_plan(sample: MarketData) -> None:
    agent = ScriptedAgent(["junk"] * 2)
    opts = SessionOptions(settings=LoopSettings(view_request_cap=1))
    result = run_session(sample, agent, opts)
    turn = result.days[0].outcomes[0].turn
    assert isinstance(turn, StandDownTurn) and "view_request_cap 1 reached" in turn.reason
    assert not any(isinstance(e, Armed) for e in result.days[0].ledger.events)


def _scripted_run(sample: MarketData, profile: str | None) -> SessionResult:
    resolved = resolve(Flags(), None, lookup(profile) if profile else None)
    s = resolved.settings
    opts = SessionOptions(
        checkpoints=("11:00",),
        settings=LoopSettings.of(s),
        policy=resolved.policy,
        profile=resolved.profile,
    )
    agent = ScriptedAgent(["VIEW scout: quote", "oops", ORB, "PASS"], usage=Usage(input=100))
    result = run_session(sample, agent, opts)
    agent.assert_finished()
    return result


def test_balanced_is_byte_identical_to_an_unflagged_run(sample: MarketData) -> None:
    plain, balanced = _scripted_run(sample, None), _scripted_run(sample, "balanced")
    assert balanced.ledger_jsonl() == plain.ledger_jsonl()
    assert balanced.capture_jsonl() == plain.capture_jsonl()
    assert [msgspec.structs.replace(e, profile=None) for e in balanced.evidence] == plain.evidence
    assert {e.profile for e in balanced.evidence} == {"balanced"}
    assert len(plain.evidence) == 2


def test_fixed_agent_arms_its_plan_and_a_refused_plan_stands_down(sample: MarketData) -> None:
    result = run_session(sample, FixedAgent(ORB, name="orb"), SessionOptions(checkpoints=("11:00",)))
    assert [o.armed for o in result.days[0].outcomes] == ["armed orb", "kept orb"]
    other = ORB.replace("PLAN orb", "PLAN other ON MSFT")
    refused = run_session(sample, FixedAgent(other), SessionOptions())
    assert refused.days[0].outcomes[0].armed.startswith("refused: plan other refused by the engine")
    assert not any(isinstance(e, (Armed, Disarmed)) for e in refused.days[0].ledger.events)


def test_multi_day_runs_one_session_per_day(sample: MarketData) -> None:
    result = run_session(sample, BaselineAgent(), SessionOptions(), days=3)
    assert [d.date for d in result.days] == ["2024-04-11", "2024-04-12", "2024-04-15"]
    assert result.header.dates == ("2024-04-11", "2024-04-12", "2024-04-15")
    seen: list[tuple[int, int]] = []
    run_session(sample, BaselineAgent(), SessionOptions(), days=2, progress=lambda k, n: seen.append((k, n)))
    assert seen == [(1, 2), (2, 2)]
    one = run_session(sample, BaselineAgent(), SessionOptions(), date=dt.date(2024, 4, 12))
    assert [d.date for d in one.days] == ["2024-04-12"]


def test_bad_dates_days_and_checkpoints_fail_clearly(sample: MarketData) -> None:
    with pytest.raises(SessionError, match="no session on 2024-05-01"):
        run_session(sample, BaselineAgent(), date=dt.date(2024, 5, 1))
    with pytest.raises(SessionError, match="holds only 6 sessions"):
        run_session(sample, BaselineAgent(), days=7)
    s = sample.sessions[-1]
    with pytest.raises(ScheduleError, match="outside the session"):
        ordinals(s, ["17:00"])
    with pytest.raises(ScheduleError, match="HH:MM"):
        ordinals(s, ["noon"])
    with pytest.raises(ScheduleError, match="twice"):
        ordinals(s, ["11:00", "11:00"])
    assert [o.label for o in ordinals(s, ["13:00", "10:15"])] == ["OPEN", "10:15", "13:00"]


def test_plans_round_trip_through_the_capture(sample: MarketData) -> None:
    result = _baseline(sample)
    _, turns = decode_capture(result.capture_jsonl())
    plan = turns[0].turn
    assert isinstance(plan, Supersede)
    assert lang.parse(lang.format(plan.plan)) == plan.plan


def test_evidence_names_the_session_date_on_multi_day_runs(sample: MarketData) -> None:
    agent = ScriptedAgent(["VIEW scout: quote", "PASS"] * 2)
    result = run_session(sample, agent, SessionOptions(), days=2)
    agent.assert_finished()
    assert [(e.date, e.ordinal, e.iteration, e.kind) for e in result.evidence] == [
        ("2024-04-12", "OPEN", 0, "view-request"),
        ("2024-04-15", "OPEN", 0, "view-request"),
    ]


def test_a_fixed_plan_is_armed_at_every_sessions_open(sample: MarketData) -> None:
    result = run_session(sample, FixedAgent(ORB, name="orb"), SessionOptions(checkpoints=("12:00",)), days=3)
    assert [[o.armed for o in d.outcomes] for d in result.days] == [["armed orb", "kept orb"]] * 3
    assert [sum(isinstance(e, Armed) for e in d.ledger.events) for d in result.days] == [1, 1, 1]


def test_a_negative_guard_is_refused() -> None:
    with pytest.raises(SessionError, match="guard must be 0 to 86399 seconds, got -60"):
        SessionOptions(guard_s=-60)


def test_thorough_self_correction_on_the_real_snapshot(sample: MarketData) -> None:
    # at the OPEN cutoff (09:25) the last price is ~188: `last > 1` already holds
    hot = "PLAN hot RISK maxpos 10 maxloss 100\nWHEN last > 1: BUY 10 MKT STOP -0.5\n"
    resolved = resolve(Flags(), None, lookup("thorough"))
    s = resolved.settings
    opts = SessionOptions(
        settings=LoopSettings.of(s),
        policy=resolved.policy,
        profile=resolved.profile,
    )
    agent = ScriptedAgent([hot, ORB])
    result = run_session(sample, agent, opts)
    agent.assert_finished()
    assert [e.kind for e in result.evidence] == ["self-correction"]
    assert agent.requests[1].repair_error == (
        "self-correction: the plan is classified HIGH: rule 1: its condition already holds at the cutoff, "
        "so it would fire on "
        "the first tick (wait for a fresh signal instead). Correct the plan, or reply STANDDOWN or PASS."
    )
    assert agent.requests[0].effort == "high"
    assert result.days[0].outcomes[0].armed == "armed orb"


def test_a_window_longer_than_the_session_is_a_repair_not_a_rule_that_never_fires(
    sample: MarketData,
) -> None:
    # The sample's session is 09:30-16:00 (6h30m): the engine evaluates one session, so
    # high(1d) could never be defined. The runtime rejects it with repair guidance instead.
    long_window = "PLAN w\nWHEN last > high(1d): BUY 10 MKT STOP -1%"
    agent = ScriptedAgent([long_window, ORB])
    sink: list[Evidence] = []
    result = run_session(sample, agent, SessionOptions(), sink=sink.append)
    agent.assert_finished()
    assert [e.kind for e in sink] == ["repair"]
    assert sink[0].error is not None
    assert "high's d of 1d is longer than the data available (390m)" in sink[0].error
    assert "use at most 390m" in sink[0].error
    assert isinstance(result.days[0].outcomes[0].turn, Supersede)
    # the repair text reached the agent on its second request
    assert agent.requests[1].repair_error == sink[0].error
