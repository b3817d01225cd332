"""Driving an authoring loop synchronously with an agent (the embedding used by `run_session`
and tests; the actor driver does the same with messages).

Every agent call is isolated (`kestrel.session.calls`): a blocking agent's call that outlives
`timeout` is abandoned and the loop stands down fail-closed at once; its late reply, if any,
lands in `late` (evidence only, never used)."""

from __future__ import annotations

from kestrel.session.calls import Answered, CallOutcome, LateReplies, call_agent
from kestrel.session.loop import AuthoringLoop, Done, Outcome
from kestrel.session.protocol import Agent


def give_outcome(loop: AuthoringLoop, outcome: CallOutcome) -> Outcome:
    """Give one call's outcome to the loop: a reply is interpreted, a failure or a timeout is
    a fail-closed stand-down (`receive_failure`) naming it and its kind."""
    if isinstance(outcome, Answered):
        return loop.receive_reply(outcome.reply)
    return loop.receive_failure(outcome.error, outcome.kind)


def author_turn(
    loop: AuthoringLoop,
    agent: Agent,
    *,
    timeout: float | None = None,
    late: LateReplies | None = None,
) -> Done:
    """Ask, give the answer to the loop, repeat until the loop is done. An agent exception or a call
    past `timeout` seconds (blocking agents only; None = no limit) becomes a fail-closed
    stand-down with the error as the reason."""
    box = late if late is not None else LateReplies()
    request = loop.next_request()
    while True:
        outcome = give_outcome(loop, call_agent(agent, request, timeout=timeout, late=box, date=loop.date))
        if isinstance(outcome, Done):
            return outcome
        request = outcome


__all__ = ["author_turn", "give_outcome"]
