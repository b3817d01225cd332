"""Driving an authoring loop synchronously with an agent (the embedding used by `run_session`
and tests; the actor driver does the same with messages)."""

from __future__ import annotations

from kestrel.session.loop import AuthoringLoop, Done
from kestrel.session.protocol import Agent


def author_turn(loop: AuthoringLoop, agent: Agent) -> Done:
    """Ask, feed the answer in, repeat until the loop is done. An agent exception becomes a
    fail-closed stand-down (`receive_failure`) with the exception's text as the reason."""
    request = loop.next_request()
    while True:
        try:
            reply = agent.author(request)
        except Exception as exc:  # any agent failure fails closed, never propagates a plan
            return loop.receive_failure(f"{type(exc).__name__}: {exc}")
        outcome = loop.receive_reply(reply)
        if isinstance(outcome, Done):
            return outcome
        request = outcome


__all__ = ["author_turn"]
