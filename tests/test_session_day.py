"""The day driver (`kestrel.session.day.DayDriver`): the sans-IO state machine both `run_day`
and the actor driver drive. Its steps come in a fixed order, answers out of order fail, and a
hand-written driver of it reproduces `run_day`'s ledger and capture."""

from __future__ import annotations

import pytest

from kestrel.agents.baseline import BaselineAgent
from kestrel.data.sample import load_sample
from kestrel.session.day import (
    Arm,
    RunAuthoring,
    CollectLate,
    DayDriver,
    FinishDay,
    Finished,
    ReadAccount,
    RunTicks,
    Step,
    advance,
    apply_turn,
    new_engine,
)
from kestrel.session.days import session_days
from kestrel.session.drive import author_turn
from kestrel.session.options import SessionOptions, engine_config
from kestrel.session.results import DayResult, path_tally
from kestrel.session.runner import run_day

OPTS = SessionOptions(checkpoints=("11:00", "13:30"))


def drive(steps: list[str], arms: list[int] | None = None) -> DayResult:
    """Drive one sample day by hand (no late replies: the agent is synchronous and quick),
    naming each step as it comes (and each `Arm`'s instant in `arms`)."""
    data = load_sample()
    day = session_days(data, OPTS)[0]
    agent = BaselineAgent()
    engine = new_engine(day, engine_config(OPTS, data), None)
    tally = path_tally()
    driver = DayDriver(day, OPTS, agent_id=agent.agent_id, model=agent.model, iterative=agent.iterative)
    while True:
        step: Step = driver.next_step()
        steps.append(f"{type(step).__name__}{step.stretch if isinstance(step, RunTicks) else ''}"
                     f"{'(end)' if isinstance(step, CollectLate) and step.end else ''}")
        if isinstance(step, RunTicks):
            advance(engine, day.stretch(step.stretch), "reference", tally)
            driver.ran()
        elif isinstance(step, ReadAccount):
            driver.account(engine.account())
        elif isinstance(step, RunAuthoring):
            driver.authored(author_turn(step.loop, agent))
        elif isinstance(step, Arm):
            if arms is not None:
                arms.append(step.at_ns)
            incumbent, what = apply_turn(engine, step.turn.turn, step.incumbent, step.at_ns)
            driver.armed(what, incumbent)
        elif isinstance(step, CollectLate):
            driver.late([])
        elif isinstance(step, FinishDay):
            engine.finish()
            driver.finished(engine.ledger, tally, engine.carry_out())
        else:
            assert isinstance(step, Finished)
            return step.result


def test_the_steps_come_in_the_documented_order() -> None:
    steps: list[str] = []
    arms: list[int] = []
    drive(steps, arms)
    day = session_days(load_sample(), OPTS)[0]
    session = day.session
    # each turn takes effect at its ordinal's instant: the open, 11:00, 13:30 (session time)
    assert arms == [session.open_ns, session.wall_clock_ns(11, 0), session.wall_clock_ns(13, 30)]
    per_ordinal = ["ReadAccount", "RunAuthoring", "{w}", "Arm", "CollectLate"]
    expected: list[str] = []
    for i in range(3):  # OPEN, 11:00, 13:30
        expected += [f"RunTicks{2 * i}"] + [s.replace("{w}", f"RunTicks{2 * i + 1}") for s in per_ordinal]
    expected += ["RunTicks6", "FinishDay", "CollectLate(end)", "Finished"]
    assert steps == expected


def test_a_hand_driven_day_matches_run_day_byte_for_byte() -> None:
    by_hand = drive([])
    day = session_days(load_sample(), OPTS)[0]
    direct = run_day(day, BaselineAgent(), OPTS)
    assert by_hand.ledger.to_jsonl() == direct.ledger.to_jsonl()
    assert len(by_hand.ledger) > 0
    assert by_hand.turns == direct.turns
    assert [o.armed for o in by_hand.outcomes] == [o.armed for o in direct.outcomes]


def test_an_answer_out_of_order_fails_loudly() -> None:
    data = load_sample()
    day = session_days(data, OPTS)[0]
    driver = DayDriver(day, OPTS, agent_id="a", model="m", iterative=False)
    assert driver.next_step() == RunTicks(0)
    with pytest.raises(RuntimeError, match="answered ReadAccount while the step is RunTicks"):
        driver.account(new_engine(day, engine_config(OPTS, data), None).account())
    driver.ran()
    assert driver.next_step() == ReadAccount()
    with pytest.raises(RuntimeError, match="answered FinishDay while the step is ReadAccount"):
        driver.finished(new_engine(day, engine_config(OPTS, data), None).ledger, path_tally(), None)
