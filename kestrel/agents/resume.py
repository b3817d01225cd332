"""Agents of a resumed run: moved past the turns its record already holds.

A resumed run's committed turns are answered from the record (the agent is never asked for
them again), so an agent that plays a file in order must start after them: a recorded agent
(one call per ordinal, in order) skips their captured turns. A replies agent's replies are
consumed by every call of the iterative loop (view requests and repairs too), and a committed
turn does not say how many calls it took, so such a run cannot resume past committed turns
(`ResumeError`; it fails with that reason rather than play the wrong replies). Other agents
hold no position in a file.
"""

from __future__ import annotations

from collections.abc import Sequence

from kestrel.agents.recorded import RecordedAgent, ReplayError
from kestrel.agents.replies import RepliesAgent
from kestrel.session.capture import CapturedTurn


class ResumeError(ValueError):
    """An agent that cannot continue after the committed turns (the text says why)."""


def skip_committed(agent: object, committed: Sequence[CapturedTurn]) -> None:
    """Move `agent` past `committed` (see the module docstring)."""
    if not committed:
        return
    if isinstance(agent, RecordedAgent):
        try:
            agent.skip([(t.date, t.ordinal) for t in committed])
        except ReplayError as exc:
            raise ResumeError(str(exc)) from None
    elif isinstance(agent, RepliesAgent):
        raise ResumeError(
            f"a replies agent cannot resume after {len(committed)} committed turns (the replies "
            "they consumed are not recorded); submit the run again"
        )


__all__ = ["ResumeError", "skip_committed"]
