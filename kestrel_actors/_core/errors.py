"""Errors raised by the actor runtime. Every one names the actor involved."""

from __future__ import annotations


class ActorError(Exception):
    """Base class of every error the actor runtime raises."""


class ActorStopped(ActorError):
    """The target actor is stopped (or stopping) and accepts no new message.

    Raised by `tell`/`ask` on a stopped actor, by a sender blocked on a full mailbox
    when the actor stops, and by an `ask` whose message was rejected at shutdown.
    """

    def __init__(self, actor: str, detail: str = "it accepts no new messages") -> None:
        self.actor = actor
        super().__init__(f"actor {actor!r} is stopped: {detail}")


class MailboxFull(ActorError):
    """`tell_nowait` found the target mailbox full (use `await tell(...)` to wait)."""

    def __init__(self, actor: str, capacity: int) -> None:
        self.actor = actor
        self.capacity = capacity
        super().__init__(
            f"mailbox of actor {actor!r} is full ({capacity} messages); "
            "use `await ref.tell(...)` to wait for room"
        )


class AskTimeout(ActorError, TimeoutError):
    """An `ask` got no reply within its timeout."""

    def __init__(self, actor: str, kind: str, timeout: float) -> None:
        self.actor = actor
        self.kind = kind
        self.timeout = timeout
        super().__init__(
            f"ask to actor {actor!r} timed out after {timeout:g}s waiting for a reply to a "
            f"{kind!r} message (is the actor blocked, or asking itself?)"
        )


class AskFailed(ActorError):
    """The handler of an `ask` raised; the original exception is `error` (and `__cause__`)."""

    def __init__(self, actor: str, kind: str, error: BaseException) -> None:
        self.actor = actor
        self.kind = kind
        self.error = error
        super().__init__(
            f"actor {actor!r} failed handling a {kind!r} message: {describe(error)}"
        )
        self.__cause__ = error


class UnexpectedReply(ActorError, TypeError):
    """`ask(..., expect=T)` got a reply that is not a `T`."""

    def __init__(self, actor: str, kind: str, expected: type, got: object) -> None:
        self.actor = actor
        super().__init__(
            f"actor {actor!r} replied to a {kind!r} message with {type(got).__name__}, "
            f"expected {expected.__name__}"
        )


class EscalationError(ActorError):
    """A failure escalated past the top-level actors: the whole system stops with it."""

    def __init__(self, actor: str, error: BaseException) -> None:
        self.actor = actor
        self.error = error
        super().__init__(
            f"actor {actor!r} escalated a failure to the actor system: {describe(error)}"
        )
        self.__cause__ = error


class ChildFailed(ActorError):
    """Raised inside a parent when a child escalates: handled by the parent's own policy."""

    def __init__(self, child: str, error: BaseException) -> None:
        self.child = child
        self.error = error
        super().__init__(
            f"child actor {child!r} escalated a failure: {describe(error)}"
        )
        self.__cause__ = error


def message_kind(message: object) -> str:
    """The kind of a message for error texts: its msgspec tag if it has one, else its type name."""
    config = getattr(type(message), "__struct_config__", None)
    tag = getattr(config, "tag", None)
    if isinstance(tag, str):
        return tag
    return type(message).__name__


def describe(error: BaseException) -> str:
    """An error in one line for messages and logs: `<type name>: <text>`."""
    return f"{type(error).__name__}: {error}"
