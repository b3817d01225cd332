"""Lifecycle: graceful shutdown drains, grace expiry rejects, no task outlives the system.

Grace periods run on a `VirtualClock` (the `clock` fixture): exact, and no real waiting."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actor_fixtures import Hang, task_ids
from kestrel_actors import Actor, ActorRef, ActorStopped, ActorSystem, SlowPolicy
from kestrel_actors.testing import VirtualClock

pytestmark = pytest.mark.anyio


class Item(msgspec.Struct, frozen=True, tag="item"):
    n: int


class Sink(Actor[Item | Hang]):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def on_stop(self) -> None:
        self.log.append(f"{self.name}:stopped")

    async def receive(self, message: Item | Hang) -> object:
        if isinstance(message, Hang):
            await anyio.sleep_forever()
        self.log.append(f"{self.name}:{message.n}")  # type: ignore[union-attr]
        return None


async def test_shutdown_leaves_no_task_behind() -> None:
    before = task_ids()
    log: list[str] = []
    async with ActorSystem() as system:
        a = system.spawn(lambda: Sink("a", log), name="a")
        system.spawn(lambda: Sink("b", log), name="b")
        system.bus.subscribe("t", a)
        system.bus.subscribe("t", a, policy=SlowPolicy.DROP_OLDEST, capacity=4)
        stream = system.bus.subscribe_stream("t", capacity=4, policy=SlowPolicy.DROP_OLDEST)
        for n in range(10):
            await system.bus.publish("t", Item(n=n))
        assert len(task_ids() - before) >= 3  # two actors and one bus forwarder
    assert task_ids() == before
    assert stream.pending == 4 and stream.drops == 6


async def test_graceful_shutdown_drains_accepted_messages_newest_actor_first() -> None:
    log: list[str] = []
    async with ActorSystem() as system:
        first = system.spawn(lambda: Sink("first", log), name="first")
        second = system.spawn(lambda: Sink("second", log), name="second")
        for n in range(3):
            first.tell_nowait(Item(n=n))
            second.tell_nowait(Item(n=n))
    # Every accepted message is handled (actors run concurrently, each in order), and the
    # newest actor completes its stop (drain, then on_stop) before the older one stops.
    assert [e for e in log if e.startswith("first")] == [
        "first:0", "first:1", "first:2", "first:stopped",
    ]
    assert [e for e in log if e.startswith("second")] == [
        "second:0", "second:1", "second:2", "second:stopped",
    ]
    assert log.index("second:stopped") < log.index("first:stopped")


async def test_stopping_a_parent_drains_it_then_stops_its_children() -> None:
    log: list[str] = []

    class Parent(Sink):
        async def on_start(self) -> None:
            self.child = self.ctx.spawn(lambda: Sink("child", self.log), name="child")

        async def receive(self, message: Item | Hang) -> object:
            await super().receive(message)
            if isinstance(message, Item):
                await self.child.tell(Item(n=message.n * 10))  # the child outlives our drain
            return None

    async with ActorSystem() as system:
        parent = system.spawn(lambda: Parent("parent", log), name="parent")
        await anyio.wait_all_tasks_blocked()
        child = system.lookup("parent/child")
        assert child is not None
        child.tell_nowait(Item(n=1))
        parent.tell_nowait(Item(n=2))
        await parent.stop()
        assert not child.alive
        assert system.actors == ()
    assert sorted(log[:3]) == ["child:1", "child:20", "parent:2"]
    assert log.index("parent:2") < log.index("child:20")
    assert log[3:] == ["child:stopped", "parent:stopped"]


async def test_grace_expiry_rejects_pending_asks_and_ends_every_task(
    clock: VirtualClock,
) -> None:
    before = task_ids()
    log: list[str] = []
    outcomes: list[str] = []
    async with anyio.create_task_group() as outer:
        async with ActorSystem(grace=0.1, clock=clock) as system:
            stuck = system.spawn(lambda: Sink("stuck", log), name="stuck")
            await stuck.tell(Hang())  # its handler never returns

            async def ask_later() -> None:
                try:
                    with anyio.fail_after(5):  # real time: a safety net only
                        await stuck.ask(Item(n=1), timeout=None)
                    outcomes.append("answered")
                except ActorStopped as exc:
                    outcomes.append(str(exc))

            outer.start_soon(ask_later)
            stuck.tell_nowait(Item(n=2))
            await anyio.wait_all_tasks_blocked()
        assert clock.now() == 0.1  # aborted when the grace expired
        assert system.rejected == 1  # the pending tell
    assert outcomes == ["actor 'stuck' is stopped: it stopped before handling this message"]
    assert log == []  # aborted: no message handled, on_stop cancelled
    assert task_ids() == before


async def test_an_exception_in_the_body_aborts_and_propagates() -> None:
    before = task_ids()
    with pytest.raises(KeyError):
        async with ActorSystem() as system:
            system.spawn(lambda: Sink("x", []), name="x")
            raise KeyError("boom")
    assert task_ids() == before


async def test_spawn_during_shutdown_is_refused() -> None:
    async with ActorSystem() as system:
        system.spawn(lambda: Sink("x", []), name="x")
        await system.shutdown()
        assert system.actors == ()
        with pytest.raises(ActorStopped, match="shutting down"):
            system.spawn(lambda: Sink("y", []), name="y")


async def test_stop_with_grace_aborts_a_stuck_actor_and_its_children(
    clock: VirtualClock,
) -> None:
    log: list[str] = []

    class Parent(Sink):
        async def on_start(self) -> None:
            self.ctx.spawn(lambda: Sink("child", self.log), name="child")

    async with ActorSystem(clock=clock) as system:
        stuck = system.spawn(lambda: Parent("stuck", log), name="stuck")
        await stuck.tell(Hang())
        stuck.tell_nowait(Item(n=1))
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(5):
            await stuck.stop(grace=0.05)
        assert clock.now() == 0.05
        assert not stuck.alive
        assert system.rejected == 1
        assert system.actors == ()
    assert log == []


async def test_shutdown_stops_every_actor_gracefully_when_an_older_one_leaves_early() -> None:
    # While the newest actor stops, its on_stop makes the oldest stop itself: the shutdown
    # must still stop each remaining actor gracefully (on_stop runs), none skipped/aborted.
    log: list[str] = []

    class Quitter(Sink):
        async def receive(self, message: Item | Hang) -> object:
            self.ctx.stop()
            return None

    class Last(Sink):
        def __init__(self, log: list[str], first: ActorRef[Item | Hang]) -> None:
            super().__init__("d", log)
            self.first = first

        async def on_stop(self) -> None:
            await self.first.tell(Item(n=0))
            await self.first.wait_stopped()
            await super().on_stop()

    async with ActorSystem() as system:
        first = system.spawn(lambda: Quitter("a", log), name="a")
        system.spawn(lambda: Sink("b", log), name="b")
        system.spawn(lambda: Sink("c", log), name="c")
        system.spawn(lambda: Last(log, first), name="d")
    assert log == ["a:stopped", "d:stopped", "c:stopped", "b:stopped"]
