"""`ActorRef`: the handle others hold to send an actor messages (see `actors._core.ref`)."""

from actors._core.envelope import AskEnvelope
from actors._core.ref import DEFAULT_ASK_TIMEOUT, ActorRef

__all__ = ["DEFAULT_ASK_TIMEOUT", "ActorRef", "AskEnvelope"]
