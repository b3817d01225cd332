"""The scripted agent: plays a fixed list of raw replies with set usage (for tests).

Invariant: it answers exactly as many times as scripted. A call past the end raises
`ScriptError`; `assert_finished()` raises if any scripted entry was not played. An entry may be
a `Raise` to make the agent fail on that call (to exercise fail-closed paths).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import msgspec

from kestrel.session.protocol import AgentReply, AuthorRequest, Usage


class ScriptError(AssertionError):
    """The scripted agent was called more or fewer times than scripted."""


class Raise(msgspec.Struct, frozen=True):
    """A scripted failure: the call raises `RuntimeError(message)`."""

    message: str


ScriptEntry = AgentReply | Raise | str


class ScriptedAgent:
    """Plays `script` in order; a bare string is a reply with `usage` (default zero)."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(
        self,
        script: Iterable[ScriptEntry],
        *,
        usage: Usage = Usage(),
        model: str = "scripted",
        agent_id: str = "scripted",
    ) -> None:
        self._script: list[AgentReply | Raise] = [
            AgentReply(text=e, usage=usage) if isinstance(e, str) else e for e in script
        ]
        self._model = model
        self._agent_id = agent_id
        self.requests: list[AuthorRequest] = []
        self.calls = 0

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def model(self) -> str:
        return self._model

    def author(self, request: AuthorRequest) -> AgentReply:
        self.calls += 1
        if len(self.requests) >= len(self._script):
            raise ScriptError(
                f"scripted agent called {len(self.requests) + 1} times, "
                f"but only {len(self._script)} replies were scripted"
            )
        entry = self._script[len(self.requests)]
        self.requests.append(request)
        if isinstance(entry, Raise):
            raise RuntimeError(entry.message)
        return entry

    def assert_finished(self) -> None:
        if self.calls != len(self._script):
            raise ScriptError(
                f"scripted agent called {self.calls} times, "
                f"but {len(self._script)} replies were scripted"
            )


__all__ = ["Raise", "ScriptEntry", "ScriptError", "ScriptedAgent"]
