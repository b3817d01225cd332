"""The recorded agent: replays captured terminal turns, in order.

Single-shot. Each captured turn is rendered back to canonical Kestrel text (the language's
formatter) and goes through the runtime's interpretation like any reply, so a replay gets the
same validation as the original run; `parse(format(turn)) == turn` makes it exact. A request
for an ordinal other than the next captured one raises (the session then stands down), and
`assert_finished()` reports turns left unplayed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from kestrel import lang
from kestrel.session.capture import CapturedTurn, read_capture
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


def turn_text(turn: AgentTurn) -> str:
    """A terminal turn as canonical Kestrel text."""
    if isinstance(turn, Supersede):
        return lang.format(turn.plan)
    if isinstance(turn, StandDownTurn):
        return lang.format(lang.StandDown(turn.reason))
    assert isinstance(turn, PassTurn)
    return lang.format(lang.Pass())


class RecordedAgent:
    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, turns: Iterable[CapturedTurn], *, agent_id: str = "recorded") -> None:
        self._turns = list(turns)
        self._next = 0
        self._agent_id = agent_id

    @classmethod
    def from_file(cls, path: str | Path) -> RecordedAgent:
        header, turns = read_capture(path)
        return cls(turns, agent_id=header.agent)

    @property
    def agent_id(self) -> str:
        """The id of the agent whose turns are replayed (so a replay captures identically)."""
        return self._agent_id

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        if self._next >= len(self._turns):
            raise ReplayError(
                f"the capture holds {len(self._turns)} turns; ordinal {request.ordinal} is past its end"
            )
        captured = self._turns[self._next]
        if captured.ordinal != request.ordinal:
            raise ReplayError(
                f"the capture's next turn is for ordinal {captured.ordinal}, "
                f"but the session asks for {request.ordinal}"
            )
        self._next += 1
        return AgentReply(text=turn_text(captured.turn))

    def assert_finished(self) -> None:
        if self._next != len(self._turns):
            raise ReplayError(f"{len(self._turns) - self._next} captured turns were not replayed")


__all__ = ["RecordedAgent", "ReplayError", "turn_text"]
