"""`Bus`: topic publish/subscribe with a declared policy for slow subscribers.

Defined in the private core (`kestrel_actors._core.bus`); this is its public path.
"""

from kestrel_actors._core.bus import (
    Bus,
    BusActor,
    BusCommand,
    BusHost,
    BusRefused,
    BusStats,
    DEFAULT_CAPACITY,
    GetStats,
    Mailbox,
    SlowPolicy,
    StreamSubscription,
    Subscribe,
    Subscription,
    SubscriptionStats,
    Unsubscribe,
)

__all__ = [
    "Bus",
    "BusActor",
    "BusCommand",
    "BusHost",
    "BusRefused",
    "BusStats",
    "DEFAULT_CAPACITY",
    "GetStats",
    "Mailbox",
    "SlowPolicy",
    "StreamSubscription",
    "Subscribe",
    "Subscription",
    "SubscriptionStats",
    "Unsubscribe",
]
