"""The fixed agent: arms one given `.kes` plan at the first ordinal, then passes.

Single-shot: it never enters the iterative authoring loop. The plan text goes through the
runtime's interpretation like any agent's reply, so an invalid file stands the ordinal down.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kestrel.session.protocol import AgentReply, AuthorRequest


class FixedAgent:
    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, text: str, *, name: str = "fixed") -> None:
        self._text = text
        self._agent_id = f"fixed:{name}"
        self._armed = False

    @classmethod
    def from_file(cls, path: str | Path) -> FixedAgent:
        p = Path(path)
        try:
            text = p.read_text("utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read plan file {str(path)!r}: {exc.strerror}") from None
        return cls(text, name=p.stem)

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        if self._armed:
            return AgentReply(text="PASS")
        self._armed = True
        return AgentReply(text=self._text)


__all__ = ["FixedAgent"]
