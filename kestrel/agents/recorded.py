"""The recorded agent: replays captured terminal turns, in order.

Single-shot. Each captured turn is rendered back to canonical Kestrel text (the language's
formatter) and goes through the runtime's interpretation like any reply, so a replay gets the
same validation as the original run; `parse(format(turn)) == turn` makes it exact. A request
for an ordinal other than the next captured one raises (the session then stands down), and
`assert_finished()` reports turns left unplayed. A capture records each plan as it was armed
(real values); in a blind session the agent's text is read in the blind scale, so there the
agent is given `shown` (`Blind.plan_to_blind` for the run's symbol) and renders each plan
through it: the session maps it back to the very plan recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from kestrel import lang
from kestrel.lang import ast
from kestrel.agents.base import SingleShotAgent
from kestrel.session.capture import CaptureHeader, CapturedTurn, read_capture
from kestrel.session.protocol import (
    AgentReply,
    AgentTurn,
    AuthorRequest,
    PassTurn,
    StandDownTurn,
    Supersede,
)


class ReplayError(RuntimeError):
    """The replayed session asks for other ordinals than the capture holds."""


def turn_text(turn: AgentTurn, shown: Callable[[ast.Plan], ast.Plan] | None = None) -> str:
    """A terminal turn as canonical Kestrel text (a plan through `shown` when given)."""
    if isinstance(turn, Supersede):
        return lang.format(turn.plan if shown is None else shown(turn.plan))
    if isinstance(turn, StandDownTurn):
        return lang.format(lang.StandDown(turn.reason))
    assert isinstance(turn, PassTurn)
    return lang.format(lang.Pass())


class RecordedAgent(SingleShotAgent):
    """Plays `turns` in order. `agent_id` is the id of the agent whose turns are replayed
    (so a replay captures identically)."""

    def __init__(
        self,
        turns: Iterable[CapturedTurn],
        *,
        agent_id: str = "recorded",
        header: CaptureHeader | None = None,
        shown: Callable[[ast.Plan], ast.Plan] | None = None,
    ) -> None:
        super().__init__(agent_id)
        self.turns = list(turns)
        self.header = header
        self.shown = shown  # how a recorded plan is written to the session (module docstring)
        self._next = 0

    @classmethod
    def from_file(cls, path: str | Path) -> RecordedAgent:
        """The capture at `path` (`CaptureError` with file:line when it is malformed)."""
        header, turns = read_capture(path)
        return cls(turns, agent_id=header.agent, header=header)

    def slots(self) -> list[tuple[str, str]]:
        """The (date, ordinal) of every captured turn, in order (what a session must ask)."""
        return [(t.date, t.ordinal) for t in self.turns]

    def skip(self, slots: list[tuple[str, str]]) -> None:
        """The turns of `slots` (date, ordinal) were already played (a resumed run answers
        them from its record): the next call is for the turn after them. `ReplayError` when
        they are not this capture's first turns."""
        if self._next != 0 or slots != self.slots()[: len(slots)]:
            raise ReplayError(f"the {len(slots)} turns already played are not this capture's first turns")
        self._next = len(slots)

    def author(self, request: AuthorRequest) -> AgentReply:
        if self._next >= len(self.turns):
            raise ReplayError(
                f"the capture holds {len(self.turns)} turns; ordinal {request.ordinal} is past its end"
            )
        captured = self.turns[self._next]
        if captured.ordinal != request.ordinal:
            raise ReplayError(
                f"the capture's next turn is for ordinal {captured.ordinal}, "
                f"but the session asks for {request.ordinal}"
            )
        self._next += 1
        return AgentReply(text=turn_text(captured.turn, self.shown))

    def assert_finished(self) -> None:
        if self._next != len(self.turns):
            raise ReplayError(f"{len(self.turns) - self._next} captured turns were not replayed")


__all__ = ["RecordedAgent", "ReplayError", "turn_text"]
