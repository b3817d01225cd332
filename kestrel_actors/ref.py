"""`ActorRef`: the handle others hold to send an actor messages (see `kestrel_actors._core.ref`)."""

from kestrel_actors._core.envelope import AskEnvelope
from kestrel_actors._core.ref import DEFAULT_ASK_TIMEOUT, ActorRef

__all__ = ["DEFAULT_ASK_TIMEOUT", "ActorRef", "AskEnvelope"]
