"""Bus: fan-out to several subscribers, slow-subscriber policies, bounded memory."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from actor_fixtures import settle_until
from kestrel_actors import Actor, ActorStopped, ActorSystem, SlowPolicy

pytestmark = pytest.mark.anyio


class Fill(msgspec.Struct, frozen=True, tag="fill"):
    seq: int


class Collector(Actor[Fill]):
    def __init__(self, seen: list[int], gate: anyio.Event | None = None) -> None:
        self.seen = seen
        self.gate = gate

    async def receive(self, message: Fill) -> object:
        if self.gate is not None:
            await self.gate.wait()
        self.seen.append(message.seq)
        return len(self.seen)


async def test_fan_out_reaches_every_subscriber_in_publish_order() -> None:
    a: list[int] = []
    b: list[int] = []
    async with ActorSystem() as system:
        bus = system.bus
        ra = system.spawn(lambda: Collector(a), name="a")
        rb = system.spawn(lambda: Collector(b), name="b")
        bus.subscribe("fills", ra)
        bus.subscribe("fills", rb)
        stream = bus.subscribe_stream("fills")
        other = bus.subscribe_stream("orders")
        for seq in range(50):
            assert await bus.publish("fills", Fill(seq=seq)) == 3
        assert await bus.publish("nobody", Fill(seq=0)) == 0
        received = [(await stream.receive()).seq for _ in range(50)]
        assert bus.topics() == ("fills", "orders")
    assert a == list(range(50))
    assert b == list(range(50))
    assert received == list(range(50))
    assert other.pending == 0


async def test_unsubscribe_stops_delivery_and_the_stream_ends_after_its_backlog() -> None:
    async with ActorSystem() as system:
        bus = system.bus
        stream = bus.subscribe_stream("t")
        await bus.publish("t", Fill(seq=1))
        await bus.publish("t", Fill(seq=2))
        bus.unsubscribe(stream)
        bus.unsubscribe(stream)  # idempotent
        assert await bus.publish("t", Fill(seq=3)) == 0
        got = [m.seq async for m in stream]
        assert got == [1, 2]
        assert bus.topics() == ()


async def test_block_policy_applies_backpressure_to_the_publisher() -> None:
    async with ActorSystem() as system:
        bus = system.bus
        stream = bus.subscribe_stream("t", policy=SlowPolicy.BLOCK, capacity=3)
        for seq in range(3):
            await bus.publish("t", Fill(seq=seq))
        published = anyio.Event()

        async def publish_fourth() -> None:
            await bus.publish("t", Fill(seq=3))
            published.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(publish_fourth)
            await anyio.wait_all_tasks_blocked()
            assert not published.is_set()  # the publisher waits for the slow subscriber
            assert stream.pending == 3
            assert (await stream.receive()).seq == 0  # room for one: the publisher proceeds
        assert published.is_set()
        assert [(await stream.receive()).seq for _ in range(3)] == [1, 2, 3]
        assert stream.drops == 0


async def test_drop_oldest_keeps_the_newest_and_counts_drops_with_bounded_memory() -> None:
    async with ActorSystem() as system:
        bus = system.bus
        slow = bus.subscribe_stream("t", policy=SlowPolicy.DROP_OLDEST, capacity=5)
        fast = bus.subscribe_stream("t", policy=SlowPolicy.BLOCK, capacity=10_000)
        for seq in range(1000):
            await bus.publish("t", Fill(seq=seq))  # never waits on `slow`
            assert slow.pending <= 5
        assert slow.drops == 995
        assert [(await slow.receive()).seq for _ in range(5)] == [995, 996, 997, 998, 999]
        assert fast.pending == 1000 and fast.drops == 0


async def test_drop_oldest_for_a_stalled_actor_is_bounded_and_counted() -> None:
    gate = anyio.Event()
    seen: list[int] = []
    async with ActorSystem() as system:
        bus = system.bus
        ref = system.spawn(lambda: Collector(seen, gate), name="stalled", mailbox=2)
        sub = bus.subscribe("t", ref, policy=SlowPolicy.DROP_OLDEST, capacity=3)
        with anyio.fail_after(5):
            for seq in range(100):
                await bus.publish("t", Fill(seq=seq))
                await anyio.wait_all_tasks_blocked()
        # The actor holds 1 in its handler + 2 in its mailbox, the forwarder 1, the buffer 3.
        assert ref.pending == 2
        assert sub.drops == 100 - (1 + 2 + 1 + 3)
        gate.set()
        await settle_until(lambda: len(seen) == 7)
    assert seen[:4] == [0, 1, 2, 3]  # taken before the actor stalled
    assert seen[4:] == [97, 98, 99]  # the newest survive, the rest were dropped


async def test_subscriptions_of_a_stopped_actor_are_removed() -> None:
    async with ActorSystem() as system:
        bus = system.bus
        ref = system.spawn(lambda: Collector([]), name="gone")
        bus.subscribe("t", ref)
        await ref.stop()
        assert await bus.publish("t", Fill(seq=1)) == 0
        assert bus.subscriptions("t") == ()


async def test_subscribe_validates_its_arguments() -> None:
    async with ActorSystem() as system:
        with pytest.raises(ValueError, match="capacity must be >= 1"):
            system.bus.subscribe_stream("t", capacity=0)
        with pytest.raises(ValueError, match="non-empty"):
            system.bus.subscribe_stream("")
        with pytest.raises(ValueError, match="capacity must be an int, got 2.5"):
            system.bus.subscribe_stream("t", capacity=2.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="unknown slow policy 'drop_newest'; use one of"):
            system.bus.subscribe_stream("t", policy="drop_newest")  # type: ignore[arg-type]
        # A policy given as its plain string value is the policy, not silently another one.
        stream = system.bus.subscribe_stream("t", policy="block", capacity=1)  # type: ignore[arg-type]
        assert stream.policy is SlowPolicy.BLOCK
        await system.bus.publish("t", Fill(seq=1))
        async with anyio.create_task_group() as tg:
            tg.start_soon(system.bus.publish, "t", Fill(seq=2))  # BLOCK: waits, never drops
            await anyio.wait_all_tasks_blocked()
            assert stream.drops == 0 and stream.pending == 1
            tg.cancel_scope.cancel()
        assert stream.drops == 0 and stream.pending == 1
        bus = system.bus
    with pytest.raises(ActorStopped, match="shutting down"):
        await bus.publish("t", Fill(seq=1))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_drop_oldest_matches_a_bounded_deque_model(backend: str) -> None:
    """Differential property: for any interleaving of publishes and reads, a DROP_OLDEST
    stream behaves like `deque(maxlen=capacity)`: same messages read, same drop count,
    never more than `capacity` held."""
    from collections import deque

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None)
    @given(
        capacity=st.integers(min_value=1, max_value=6),
        ops=st.lists(st.sampled_from(["pub", "pub", "read"]), max_size=40),
    )
    def check(capacity: int, ops: list[str]) -> None:
        async def run() -> tuple[list[int], int]:
            read: list[int] = []
            async with ActorSystem() as system:
                sub = system.bus.subscribe_stream(
                    "t", policy=SlowPolicy.DROP_OLDEST, capacity=capacity
                )
                for seq, op in enumerate(ops):
                    if op == "pub":
                        await system.bus.publish("t", Fill(seq=seq))
                    elif sub.pending:
                        read.append((await sub.receive()).seq)
                    assert sub.pending <= capacity
                return read, sub.drops

        model: deque[int] = deque(maxlen=capacity)
        expected_read: list[int] = []
        expected_drops = 0
        for seq, op in enumerate(ops):
            if op == "pub":
                expected_drops += len(model) == capacity
                model.append(seq)
            elif model:
                expected_read.append(model.popleft())
        assert anyio.run(run, backend=backend) == (expected_read, expected_drops)

    check()


async def test_bus_actor_serves_subscribe_unsubscribe_and_stats_as_encoded_messages() -> None:
    # The control plane crosses a process boundary as bytes: every request and reply here
    # goes through the codec, and subscribers are addressed by name.
    from kestrel_actors import (
        BusActor,
        BusRefused,
        BusStats,
        Codec,
        GetStats,
        Subscribe,
        SubscriptionStats,
        Unsubscribe,
    )

    codec = Codec([Subscribe, Unsubscribe, GetStats, BusStats, SubscriptionStats, BusRefused])

    def wire(message: msgspec.Struct) -> Any:
        return codec.decode(codec.encode(message, "msgpack"), "msgpack")

    seen: list[int] = []
    async with ActorSystem() as system:
        control = system.spawn(lambda: BusActor(system.bus), name="bus")
        system.spawn(lambda: Collector(seen), name="collector")
        tape = system.bus.subscribe_stream("fills", policy=SlowPolicy.DROP_OLDEST, capacity=2)

        reply = wire(await control.ask(wire(Subscribe(topic="fills", subscriber="collector"))))
        assert reply == SubscriptionStats(
            topic="fills", subscriber="collector", policy=SlowPolicy.BLOCK,
            capacity=1024, pending=0, drops=0,
        )
        for seq in range(3):
            assert await system.bus.publish("fills", Fill(seq=seq)) == 2
        await anyio.wait_all_tasks_blocked()  # the collector has taken its three
        stats = wire(await control.ask(wire(GetStats())))
        assert isinstance(stats, BusStats)
        assert [(s.subscriber, s.policy, s.capacity, s.pending, s.drops)
                for s in stats.subscriptions] == [
            ("stream#1", SlowPolicy.DROP_OLDEST, 2, 2, 1),
            ("collector", SlowPolicy.BLOCK, 1024, 0, 0),
        ]
        assert await control.ask(wire(Unsubscribe(topic="fills", subscriber="collector"))) == 1
        assert await control.ask(Unsubscribe(topic="fills", subscriber="collector")) == 0
        assert await system.bus.publish("fills", Fill(seq=3)) == 1  # only the stream is left
        assert tape.drops == 2

        refused = await control.ask(Subscribe(topic="fills", subscriber="nobody"))
        assert refused == BusRefused("no live actor named 'nobody' to subscribe")
        refused = await control.ask(Subscribe(topic="", subscriber="collector"))
        assert refused == BusRefused("topic must be a non-empty string")
        refused = await control.ask(Subscribe(topic="t", subscriber="collector", capacity=0))
        assert isinstance(refused, BusRefused) and "capacity must be >= 1" in refused.reason
        refused = await control.ask(Fill(seq=9))  # type: ignore[call-overload]
        assert refused == BusRefused(
            "not a bus request: 'fill' (send Subscribe, Unsubscribe, GetStats)"
        )
        assert control.alive  # bad requests never fail the bus actor
    assert seen == [0, 1, 2]


async def test_bus_stats_report_a_drop_oldest_actor_buffer() -> None:
    gate = anyio.Event()
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Collector([], gate), name="stalled", mailbox=1)
        system.bus.subscribe("t", ref, policy=SlowPolicy.DROP_OLDEST, capacity=2)
        for seq in range(10):
            await system.bus.publish("t", Fill(seq=seq))
            await anyio.wait_all_tasks_blocked()
        (only,) = system.bus.stats().subscriptions
        # 1 in the handler, 1 in the mailbox, 1 held by the forwarder, 2 buffered: 5 dropped.
        assert (only.subscriber, only.pending, only.drops) == ("stalled", 2, 5)
        gate.set()


async def test_a_drop_oldest_subscription_of_a_stopped_actor_is_removed() -> None:
    async with ActorSystem() as system:
        bus = system.bus
        ref = system.spawn(lambda: Collector([]), name="gone")
        sub = bus.subscribe("t", ref, policy=SlowPolicy.DROP_OLDEST, capacity=3)
        await ref.stop()
        with anyio.fail_after(5):
            while await bus.publish("t", Fill(seq=1)):
                await anyio.wait_all_tasks_blocked()  # the forwarder meets the stopped actor
        assert bus.subscriptions("t") == ()
        assert not sub.active
