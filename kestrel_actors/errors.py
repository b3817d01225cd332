"""Errors raised by the actor runtime. Every one names the actor involved.

Defined in the private core (`kestrel_actors._core.errors`); this is its public path.
"""

from kestrel_actors._core.errors import (
    ActorError,
    ActorStopped,
    AskFailed,
    AskTimeout,
    ChildFailed,
    EscalationError,
    MailboxFull,
    UnexpectedReply,
    describe,
    message_kind,
)

__all__ = [
    "ActorError",
    "ActorStopped",
    "AskFailed",
    "AskTimeout",
    "ChildFailed",
    "EscalationError",
    "MailboxFull",
    "UnexpectedReply",
    "describe",
    "message_kind",
]
