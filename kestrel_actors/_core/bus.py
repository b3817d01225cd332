"""`Bus`: topic publish/subscribe with a declared policy for slow subscribers.

A subscriber is an actor (its messages arrive through its mailbox) or a stream (an async
iterator the subscriber reads). Each subscription declares what happens when it is slow:

- `SlowPolicy.BLOCK`: backpressure. The publisher waits until the subscriber has room, so
  nothing is lost and a slow subscriber slows the publisher down.
- `SlowPolicy.DROP_OLDEST`: the subscription keeps at most `capacity` undelivered messages;
  when full, the oldest is discarded to make room and counted in `Subscription.drops`.

Memory is bounded whatever a subscriber does: a `BLOCK` subscription holds at most its
buffer (the actor's mailbox, or `capacity` for a stream) and a `DROP_OLDEST` one at most
`capacity` messages (plus the actor's mailbox, for an actor).

Fan-out happens on the publisher's side, without an extra hop: `publish` offers the message
to each subscription of the topic in subscription order with `send_nowait`, and only awaits
for a full `BLOCK` subscription. So each subscriber sees one publisher's messages in publish
order. The one extra hop is for an actor with `DROP_OLDEST`: its bounded buffer is forwarded
into the mailbox by a small task, so that dropping never touches the actor's other messages.
Subscriptions of a stopped actor or a closed stream are removed on the next publish.

The bus sees its system through the narrow `BusHost` protocol (implemented by the system's
runtime): `start_task` for forwarders and `cell_of(ref)`, the actor's mailbox entry
(`post_nowait`/`post`, the same entry `ActorRef.tell` uses). Each subscription's delivery
functions live in the bus's own `_Route`, not in the public `Subscription`.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec
from anyio import BrokenResourceError, ClosedResourceError, EndOfStream, WouldBlock
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from kestrel_actors._core.actor import Actor
from kestrel_actors._core.errors import ActorStopped, MailboxFull, message_kind

if TYPE_CHECKING:
    from kestrel_actors._core.ref import ActorRef

DEFAULT_CAPACITY = 1024


class SlowPolicy(enum.StrEnum):
    """What a subscription does when its subscriber cannot keep up."""

    BLOCK = "block"
    DROP_OLDEST = "drop_oldest"


class SubscriptionStats(msgspec.Struct, frozen=True, tag="bus.subscription"):
    """One subscription's figures; plain data, so it crosses a process boundary unchanged."""

    topic: str
    subscriber: str
    policy: SlowPolicy
    capacity: int
    pending: int
    drops: int


class BusStats(msgspec.Struct, frozen=True, tag="bus.stats"):
    """Every live subscription of a bus (topics sorted, then in subscription order)."""

    subscriptions: tuple[SubscriptionStats, ...] = ()


class Subscribe(msgspec.Struct, frozen=True, tag="bus.subscribe"):
    """Ask the `BusActor` to deliver `topic` to the live actor named `subscriber`."""

    topic: str
    subscriber: str
    policy: SlowPolicy = SlowPolicy.BLOCK
    capacity: int = DEFAULT_CAPACITY


class Unsubscribe(msgspec.Struct, frozen=True, tag="bus.unsubscribe"):
    """Ask the `BusActor` to stop delivering `topic` to `subscriber`; replies the count removed."""

    topic: str
    subscriber: str


class GetStats(msgspec.Struct, frozen=True, tag="bus.get_stats"):
    """Ask the `BusActor` for `BusStats`."""


class BusRefused(msgspec.Struct, frozen=True, tag="bus.refused"):
    """The `BusActor`'s reply to a request it cannot honour, saying why."""

    reason: str


BusCommand = Subscribe | Unsubscribe | GetStats
"""The messages a `BusActor` accepts (register them with a `Codec` to carry them)."""


class Subscription:
    """One subscriber's interest in one topic."""

    __slots__ = ("topic", "subscriber", "policy", "capacity", "drops", "active", "_pending")

    def __init__(
        self,
        topic: str,
        subscriber: str,
        policy: SlowPolicy,
        capacity: int,
        pending: Callable[[], int],
    ) -> None:
        self.topic = topic
        self.subscriber = subscriber
        """The subscribing actor's name, or `stream#<n>` for a stream."""
        self.policy = policy
        self.capacity = capacity
        self.drops = 0
        """Messages discarded by `DROP_OLDEST` because the subscriber was behind."""
        self.active = True
        self._pending = pending

    @property
    def pending(self) -> int:
        """Messages delivered to this subscription and not yet taken by the subscriber."""
        return self._pending()

    def stats(self) -> SubscriptionStats:
        return SubscriptionStats(
            topic=self.topic, subscriber=self.subscriber, policy=self.policy,
            capacity=self.capacity, pending=self.pending, drops=self.drops,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(topic={self.topic!r}, subscriber={self.subscriber!r}, "
            f"policy={self.policy.value}, capacity={self.capacity}, drops={self.drops})"
        )


class StreamSubscription(Subscription):
    """A subscription read as an async iterator; `async with` unsubscribes on exit."""

    __slots__ = ("_recv", "_bus")

    def __init__(
        self,
        bus: Bus,
        topic: str,
        subscriber: str,
        policy: SlowPolicy,
        capacity: int,
        recv: MemoryObjectReceiveStream[Any],
    ) -> None:
        super().__init__(topic, subscriber, policy, capacity, self._buffered)
        self._recv = recv
        self._bus = bus

    def _buffered(self) -> int:
        """Messages buffered for this subscriber, never more than `capacity`."""
        return self._recv.statistics().current_buffer_used

    async def receive(self) -> Any:
        """The next message; raises `anyio.EndOfStream` once unsubscribed and drained."""
        return await self._recv.receive()

    def __aiter__(self) -> StreamSubscription:
        return self

    async def __anext__(self) -> Any:
        # A plain iterator, not an async generator: nothing to finalize if abandoned.
        try:
            return await self._recv.receive()
        except (EndOfStream, ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> StreamSubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bus.unsubscribe(self)
        self._recv.close()


class Mailbox(Protocol):
    """An actor's mailbox entry: `post_nowait` raises `WouldBlock` when full and
    `ClosedResourceError` once the actor is stopped; `post` waits for room."""

    def post_nowait(self, item: object) -> None: ...

    async def post(self, item: object) -> None: ...


class BusHost(Protocol):
    """What a bus needs from its actor system."""

    def start_task(self, func: Callable[[], Any], name: str) -> None:
        """Run a helper task (a `DROP_OLDEST` forwarder) in the system's task group."""
        ...

    def cell_of(self, ref: ActorRef[Any]) -> Mailbox | None:
        """The mailbox of the actor behind `ref`, or None once its task has ended."""
        ...


_Route = tuple[
    "Subscription", Callable[[object], None], Callable[[object], Awaitable[None]], Callable[[], None]
]
"""How the bus delivers to one subscription: `(sub, offer, send, close)`. `offer` delivers now
or raises (`WouldBlock`/`MailboxFull`: full; `ClosedResourceError`/`BrokenResourceError`/
`ActorStopped`: gone); `send` waits for room; `close` ends it. A plain tuple: `publish`
unpacks one per delivery, and only an exact tuple unpacks on the interpreter's fast path."""


_FULL = (WouldBlock, MailboxFull)
_GONE = (ClosedResourceError, BrokenResourceError, ActorStopped)


def _stream_route(
    sub: StreamSubscription,
    send: MemoryObjectSendStream[Any],
    recv: MemoryObjectReceiveStream[Any],
) -> _Route:
    """Deliver into a stream buffer; `DROP_OLDEST` discards the oldest message when full."""
    if sub.policy is SlowPolicy.BLOCK:
        return (sub, send.send_nowait, send.send, send.close)

    def offer_dropping(message: object) -> None:
        try:
            send.send_nowait(message)
        except WouldBlock:
            recv.receive_nowait()
            sub.drops += 1
            send.send_nowait(message)

    return (sub, offer_dropping, send.send, send.close)


class Bus:
    """Topic fan-out for one `ActorSystem` (`system.bus`)."""

    def __init__(self, host: BusHost) -> None:
        self._host = host
        self._topics: dict[str, tuple[_Route, ...]] = {}
        self._closed = False
        self._streams = itertools.count(1)

    def topics(self) -> tuple[str, ...]:
        """Topics with at least one subscription, sorted."""
        return tuple(sorted(self._topics))

    def subscriptions(self, topic: str) -> tuple[Subscription, ...]:
        return tuple(route[0] for route in self._topics.get(topic, ()))

    def subscribe(
        self,
        topic: str,
        ref: ActorRef[Any],
        *,
        policy: SlowPolicy = SlowPolicy.BLOCK,
        capacity: int = DEFAULT_CAPACITY,
    ) -> Subscription:
        """Deliver `topic` to the actor `ref`. With `BLOCK` its mailbox is the buffer (and
        `capacity` is unused); with `DROP_OLDEST` up to `capacity` messages wait for it."""
        policy = self._check(topic, policy, capacity)
        if policy is SlowPolicy.BLOCK:
            sub = Subscription(topic, ref.name, policy, ref.capacity, lambda: ref.pending)
            mailbox = self._host.cell_of(ref)
            if mailbox is None:  # already ended: removed on the next publish, as any stopped one
                self._add((sub, ref.tell_nowait, ref.tell, _nothing))
            else:
                self._add((sub, mailbox.post_nowait, mailbox.post, _nothing))
            return sub
        send, recv = anyio.create_memory_object_stream[Any](capacity)
        stream = StreamSubscription(self, topic, ref.name, policy, capacity, recv)
        self._host.start_task(
            lambda: self._forward(stream, ref), name=f"bus-forward:{topic}->{ref.name}"
        )
        self._add(_stream_route(stream, send, recv))
        return stream

    def subscribe_stream(
        self,
        topic: str,
        *,
        policy: SlowPolicy = SlowPolicy.BLOCK,
        capacity: int = DEFAULT_CAPACITY,
    ) -> StreamSubscription:
        """A stream of `topic`'s messages holding at most `capacity` of them."""
        policy = self._check(topic, policy, capacity)
        send, recv = anyio.create_memory_object_stream[Any](capacity)
        name = f"stream#{next(self._streams)}"
        sub = StreamSubscription(self, topic, name, policy, capacity, recv)
        self._add(_stream_route(sub, send, recv))
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop delivering to `sub` (idempotent); a stream ends after what it already holds."""
        if not sub.active:
            return
        sub.active = False
        routes = self._topics.get(sub.topic, ())
        rest = tuple(route for route in routes if route[0] is not sub)
        if rest:
            self._topics[sub.topic] = rest
        else:
            self._topics.pop(sub.topic, None)
        for routed, _offer, _send, close in routes:
            if routed is sub:
                close()

    def unsubscribe_named(self, topic: str, subscriber: str) -> int:
        """Remove every subscription of `subscriber` (an actor or stream name) to `topic`."""
        subs = [r[0] for r in self._topics.get(topic, ()) if r[0].subscriber == subscriber]
        for sub in subs:
            self.unsubscribe(sub)
        return len(subs)

    def stats(self) -> BusStats:
        """Every live subscription's figures, by topic (sorted) then subscription order."""
        return BusStats(
            subscriptions=tuple(
                route[0].stats()
                for topic in sorted(self._topics)
                for route in self._topics[topic]
            )
        )

    async def publish(self, topic: str, message: object) -> int:
        """Offer `message` to every subscription of `topic`; returns how many took it.

        Waits only for a full `BLOCK` subscription (backpressure).
        """
        if self._closed:
            raise ActorStopped("bus", "the actor system is shutting down")
        count = 0
        for sub, offer, send, _close in self._topics.get(topic, ()):
            try:
                offer(message)
            except _FULL:
                try:
                    await send(message)
                except _GONE:
                    self.unsubscribe(sub)
                    continue
            except _GONE:
                self.unsubscribe(sub)
                continue
            count += 1
        return count

    def close(self) -> None:
        """Unsubscribe everything (streams end once drained); later publishes raise."""
        self._closed = True
        for routes in list(self._topics.values()):
            for route in routes:
                self.unsubscribe(route[0])

    def _check(self, topic: str, policy: SlowPolicy | str, capacity: int) -> SlowPolicy:
        """Validate a subscription request; the policy as a `SlowPolicy` (a plain str is taken)."""
        if self._closed:
            raise ActorStopped("bus", "the actor system is shutting down")
        if not isinstance(topic, str) or not topic:
            raise ValueError("topic must be a non-empty string")
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise ValueError(f"subscription capacity must be an int, got {capacity!r}")
        if capacity < 1:
            raise ValueError(f"subscription capacity must be >= 1, got {capacity}")
        try:
            return SlowPolicy(policy)
        except ValueError:
            choices = ", ".join(repr(p.value) for p in SlowPolicy)
            raise ValueError(f"unknown slow policy {policy!r}; use one of: {choices}") from None

    def _add(self, route: _Route) -> None:
        topic = route[0].topic
        self._topics[topic] = self._topics.get(topic, ()) + (route,)

    async def _forward(self, stream: StreamSubscription, ref: ActorRef[Any]) -> None:
        """Move `stream`'s messages into `ref`'s mailbox until either ends; then unsubscribe."""
        with contextlib.suppress(ActorStopped):
            async with stream:
                async for message in stream:
                    await ref.tell(message)


def _nothing() -> None:
    return None


class BusActor(Actor[BusCommand]):
    """The bus's control plane as an actor: subscribe, unsubscribe and stats by message.

    Subscribers are named, not referenced, so these requests are plain msgspec data that can
    arrive from another process (e.g. through the daemon). Bad requests (unknown actor,
    bad topic or capacity, a stopped bus) are answered with `BusRefused`, never by failing
    the actor. Publishing stays a direct `Bus.publish` call, with no hop through this actor.
    Spawn it with `system.spawn(lambda: BusActor(system.bus), name="bus")`.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def receive(self, message: BusCommand) -> object:
        bus = self.bus
        if isinstance(message, GetStats):
            return bus.stats()
        if isinstance(message, Unsubscribe):
            return bus.unsubscribe_named(message.topic, message.subscriber)
        if not isinstance(message, Subscribe):
            kind = message_kind(message)
            return BusRefused(f"not a bus request: {kind!r} (send Subscribe, Unsubscribe, GetStats)")
        ref = self.ctx.system.lookup(message.subscriber)
        if ref is None or not ref.alive:
            return BusRefused(f"no live actor named {message.subscriber!r} to subscribe")
        try:
            sub = bus.subscribe(
                message.topic, ref, policy=message.policy, capacity=message.capacity
            )
        except (ValueError, ActorStopped) as exc:
            return BusRefused(str(exc))
        return sub.stats()
