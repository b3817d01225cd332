"""A resumed run's file agents continue after the committed turns (kestrel.agents.resume)."""

from __future__ import annotations

import pytest

from kestrel.agents.recorded import RecordedAgent
from kestrel.agents.replies import RepliesAgent
from kestrel.agents.resume import ResumeError, skip_committed
from kestrel.agents.baseline import BaselineAgent
from kestrel.data import load_sample
from kestrel.session.runner import SessionOptions, run_session

OPTIONS = SessionOptions(checkpoints=("11:00", "13:30"))


def test_a_recorded_agent_continues_after_the_committed_turns() -> None:
    from types import SimpleNamespace

    from kestrel.agents.recorded import turn_text

    turns = [t for d in run_session(load_sample(), BaselineAgent(), OPTIONS).days for t in d.turns]
    agent = RecordedAgent(turns, agent_id="baseline")
    skip_committed(agent, turns[:2])
    with pytest.raises(RuntimeError, match="1 captured turns were not replayed"):
        agent.assert_finished()
    assert agent.author(SimpleNamespace(ordinal="13:30")).text == turn_text(turns[2].turn)  # type: ignore[arg-type]
    agent.assert_finished()


def test_a_recorded_agent_refuses_turns_that_are_not_its_first() -> None:
    data = load_sample()
    turns = [t for d in run_session(data, BaselineAgent(), OPTIONS).days for t in d.turns]
    with pytest.raises(ResumeError, match="not this capture's first turns"):
        skip_committed(RecordedAgent(turns, agent_id="baseline"), turns[1:2])


def test_a_replies_agent_cannot_resume_past_committed_turns_but_can_start_over() -> None:
    data = load_sample()
    turns = [t for d in run_session(data, BaselineAgent(), OPTIONS).days for t in d.turns]
    agent = RepliesAgent(("PASS", "PASS", "PASS"))
    skip_committed(agent, [])  # nothing committed: nothing to skip
    with pytest.raises(ResumeError, match="replies agent cannot resume"):
        skip_committed(agent, turns[:1])
