"""One conversation per authoring ordinal: what a model is sent at each iteration (pure).

- iteration 0 (a new ordinal) starts a new conversation: the user message is the briefing;
- a later iteration appends the model's previous reply (assistant) and then, as the next user
  message, the repair guidance with the budgets left when the reply was not accepted, or the
  newly materialized briefing when a view request succeeded;
- the system prompt (the language card) is not part of the messages: adapters send it first,
  unchanged, so provider prompt caches keep hitting.
A call abandoned on timeout cannot corrupt the next ordinal's conversation: a reply is only
appended to the generation that asked for it.
"""

from __future__ import annotations

import threading
from typing import Literal

import msgspec

from kestrel.session.protocol import AuthorRequest


class Message(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: str


def budget_line(briefing: str) -> str:
    """The briefing's `BUDGET ...` kernel line ("" when absent)."""
    for line in briefing.splitlines():
        if line.startswith("BUDGET "):
            return line
    return ""


def follow_up(request: AuthorRequest) -> str:
    """The user message of a later iteration (see the module docstring)."""
    if request.repair_error is None:
        return request.briefing
    parts = ["Your reply was not accepted:", request.repair_error.strip(), ""]
    line = budget_line(request.briefing)
    if line:
        parts.append(line)
    parts.append("Reply with exactly one statement: PLAN, VIEW, STANDDOWN or PASS.")
    return "\n".join(parts)


EMPTY_REPLY = "(empty reply)"


class Conversation:
    """The messages of the current ordinal (thread-safe: a blocking adapter may be abandoned
    mid-call by the actor shell and answer late)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[Message] = []
        self.generation = 0

    def ask(self, request: AuthorRequest) -> tuple[int, tuple[Message, ...]]:
        """The messages to send for `request`, and the generation to answer into."""
        with self._lock:
            if request.iteration == 0 or not self._messages:
                self.generation += 1
                self._messages = [Message("user", request.briefing)]
            else:
                self._messages.append(Message("user", follow_up(request)))
            return self.generation, tuple(self._messages)

    def answer(self, generation: int, text: str) -> None:
        """Record the model's reply (dropped if a newer ordinal has started)."""
        with self._lock:
            if generation == self.generation:
                self._messages.append(Message("assistant", text.strip() or EMPTY_REPLY))


__all__ = ["EMPTY_REPLY", "Conversation", "Message", "budget_line", "follow_up"]
