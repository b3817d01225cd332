"""Kestrel's actor runtime, on anyio (runs unchanged on asyncio and trio).

Actors own their state and handle one message at a time; others hold an `ActorRef` and
`tell` or `ask`. An `ActorSystem` runs every actor as a task of one task group and applies
supervision policies (`Restart`, `Stop`, `Escalate`). The system's `Bus` fans messages out
by topic with a per-subscription `SlowPolicy`; a `BusActor` serves subscribe, unsubscribe
and stats as messages. `Codec` encodes msgspec Struct messages as tagged unions in JSON or
MessagePack. See docs/actors.md.
"""

from kestrel_actors.actor import Actor, ActorContext
from kestrel_actors.bus import (
    Bus,
    BusActor,
    BusCommand,
    BusRefused,
    BusStats,
    GetStats,
    SlowPolicy,
    StreamSubscription,
    Subscribe,
    Subscription,
    SubscriptionStats,
    Unsubscribe,
)
from kestrel_actors.clock import Clock, EventLoopClock
from kestrel_actors.codec import Codec, CodecError, Format
from kestrel_actors.errors import (
    ActorError,
    ActorStopped,
    AskFailed,
    AskTimeout,
    ChildFailed,
    EscalationError,
    MailboxFull,
    UnexpectedReply,
)
from kestrel_actors.ref import DEFAULT_ASK_TIMEOUT, ActorRef
from kestrel_actors.supervision import Escalate, Restart, Stop, SupervisionPolicy
from kestrel_actors.system import ActorSystem

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "Actor",
    "ActorContext",
    "ActorError",
    "ActorRef",
    "ActorStopped",
    "ActorSystem",
    "AskFailed",
    "AskTimeout",
    "Bus",
    "BusActor",
    "BusCommand",
    "BusRefused",
    "BusStats",
    "ChildFailed",
    "Clock",
    "Codec",
    "CodecError",
    "Escalate",
    "EscalationError",
    "EventLoopClock",
    "Format",
    "GetStats",
    "MailboxFull",
    "Restart",
    "SlowPolicy",
    "Stop",
    "StreamSubscription",
    "Subscribe",
    "Subscription",
    "SubscriptionStats",
    "SupervisionPolicy",
    "UnexpectedReply",
    "Unsubscribe",
]
