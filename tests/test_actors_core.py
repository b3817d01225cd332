"""Actor basics: tell/ask, ask timeout and failure, ordering, backpressure, fairness.

Ask timeouts run on a `VirtualClock` (the `clock` fixture): exact, and no real waiting."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actor_fixtures import Add, Gate, Get, Hang, Note
from kestrel_actors import (
    Actor,
    ActorStopped,
    ActorSystem,
    AskFailed,
    AskTimeout,
    MailboxFull,
    UnexpectedReply,
)
from kestrel_actors.testing import VirtualClock

pytestmark = pytest.mark.anyio


class Fail(msgspec.Struct, frozen=True, tag="fail"):
    pass


class Counter(Actor[Add | Get | Fail]):
    def __init__(self) -> None:
        self.total = 0

    async def receive(self, message: Add | Get | Fail) -> object:
        if isinstance(message, Add):
            self.total += message.n
            return None
        if isinstance(message, Get):
            return self.total
        raise ValueError("bad input")


class Recorder(Actor[Note]):
    def __init__(self, log: list[Note]) -> None:
        self.log = log

    async def receive(self, message: Note) -> None:
        self.log.append(message)


async def test_tell_then_ask_sees_every_message() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        for n in range(1, 11):
            await ref.tell(Add(n=n))
        assert await ref.ask(Get(), expect=int) == 55  # 1 + 2 + ... + 10


async def test_ask_returns_the_handler_value_and_checks_expect() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        await ref.tell(Add(n=7))
        assert await ref.ask(Get()) == 7
        with pytest.raises(UnexpectedReply, match="'counter' replied to a 'get' message with int"):
            await ref.ask(Get(), expect=str)


async def test_ask_timeout_names_actor_and_message_kind(clock: VirtualClock) -> None:
    release = anyio.Event()
    async with ActorSystem(clock=clock) as system:
        ref = system.spawn(lambda: Gate(release, []), name="gate")
        with pytest.raises(AskTimeout) as caught:
            await ref.ask(Hang(), timeout=0.05)
        assert clock.now() == 0.05  # on its deadline exactly, not before
        assert caught.value.actor == "gate"
        assert caught.value.kind == "hang"
        assert "'gate'" in str(caught.value) and "'hang'" in str(caught.value)
        assert isinstance(caught.value, TimeoutError)
        release.set()


async def test_ask_whose_handler_fails_gets_the_error() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        with anyio.fail_after(2):  # never a hang
            with pytest.raises(AskFailed) as caught:
                await ref.ask(Fail())
        assert isinstance(caught.value.error, ValueError)
        assert caught.value.__cause__ is caught.value.error
        assert "'counter' failed handling a 'fail' message: ValueError: bad input" in str(
            caught.value
        )


async def test_per_sender_fifo_with_concurrent_senders_and_a_tiny_mailbox() -> None:
    log: list[Note] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Recorder(log), name="recorder", mailbox=2)

        async def sender(index: int) -> None:
            for seq in range(200):
                await ref.tell(Note(sender=index, seq=seq))

        async with anyio.create_task_group() as tg:
            for index in range(3):
                tg.start_soon(sender, index)
    assert len(log) == 600
    for index in range(3):
        assert [n.seq for n in log if n.sender == index] == list(range(200))


async def test_tell_blocks_while_the_mailbox_is_full() -> None:
    release = anyio.Event()
    seen: list[int] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Gate(release, seen), name="gate", mailbox=2)
        await ref.tell(Hang())
        await anyio.wait_all_tasks_blocked()  # the actor is now inside the Hang handler
        await ref.tell(Add(n=1))
        await ref.tell(Add(n=2))  # mailbox full now: 2 of 2
        assert ref.pending == 2
        with pytest.raises(MailboxFull, match="mailbox of actor 'gate' is full \\(2 messages\\)"):
            ref.tell_nowait(Add(n=99))
        done = anyio.Event()

        async def third() -> None:
            await ref.tell(Add(n=3))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(third)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()  # backpressure: the sender waits
            assert ref.pending == 2  # memory stays bounded by the capacity
            release.set()
        await ref.ask(Add(n=0))
    assert seen == [1, 2, 3, 0]


async def test_tell_and_ask_on_a_stopped_actor_raise() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        await ref.stop()
        assert not ref.alive
        with pytest.raises(ActorStopped, match="actor 'counter' is stopped"):
            await ref.tell(Add(n=1))
        with pytest.raises(ActorStopped):
            await ref.ask(Get())
        with pytest.raises(ActorStopped):
            ref.tell_nowait(Add(n=1))


class Busy(Actor[int]):
    def __init__(self, name: str, trace: list[str]) -> None:
        self.name = name
        self.trace = trace

    async def receive(self, message: int) -> None:
        self.trace.append(self.name)


async def test_batches_are_bounded_so_busy_actors_take_turns() -> None:
    trace: list[str] = []
    async with ActorSystem(batch=4, mailbox=100) as system:
        a = system.spawn(lambda: Busy("a", trace), name="a")
        b = system.spawn(lambda: Busy("b", trace), name="b")
        for i in range(20):
            a.tell_nowait(i)
            b.tell_nowait(i)
    assert trace.count("a") == 20 and trace.count("b") == 20
    # An actor yields after each batch of 4, and the other ready actor gets a turn before the
    # next batch ends; a scheduler may run the two turns in either order (trio shuffles), so
    # the longest run of one actor in the trace is at most two batches: 8, never all 20.
    longest, run = 1, 1
    for prev, cur in zip(trace, trace[1:]):
        run = run + 1 if prev == cur else 1
        longest = max(longest, run)
    assert longest <= 8


async def test_spawn_validates_names_and_capacity() -> None:
    async with ActorSystem() as system:
        system.spawn(Counter, name="x")
        with pytest.raises(ValueError, match="already running"):
            system.spawn(Counter, name="x")
        with pytest.raises(ValueError, match="without '/'"):
            system.spawn(Counter, name="a/b")
        with pytest.raises(ValueError, match="mailbox capacity must be >= 1"):
            system.spawn(Counter, name="y", mailbox=0)
        assert system.actors == ("x",)


def test_system_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="mailbox capacity must be >= 1, got 0"):
        ActorSystem(mailbox=0)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        ActorSystem(batch=0)
    with pytest.raises(ValueError, match="grace must be >= 0 seconds, got -1"):
        ActorSystem(grace=-1)
    with pytest.raises(ValueError, match="grace must be >= 0 seconds, got nan"):
        ActorSystem(grace=float("nan"))


async def test_spawn_outside_a_running_system_is_refused() -> None:
    with pytest.raises(RuntimeError, match="needs a running system"):
        ActorSystem().spawn(Counter)


async def test_ask_timeout_covers_waiting_for_mailbox_room(clock: VirtualClock) -> None:
    release = anyio.Event()
    seen: list[int] = []
    async with ActorSystem(clock=clock) as system:
        ref = system.spawn(lambda: Gate(release, seen), name="gate", mailbox=1)
        await ref.tell(Hang())
        await anyio.wait_all_tasks_blocked()
        await ref.tell(Add(n=1))  # the mailbox is full now
        with anyio.fail_after(2), pytest.raises(AskTimeout, match="after 0.05s"):
            await ref.ask(Add(n=2), timeout=0.05)
        assert clock.now() == 0.05
        assert ref.pending == 1  # the timed-out ask was withdrawn, not left queued
        release.set()
        await ref.ask(Add(n=3))
    assert seen == [1, 3]


async def test_a_shorter_ask_timeout_registered_later_still_fires_on_time(
    clock: VirtualClock,
) -> None:
    # One timer serves every ask: a 0.05 s ask registered while it sleeps towards a 30 s one
    # must wake it (the deadline heap re-arms on an earlier deadline).
    release = anyio.Event()
    entered = anyio.Event()
    outcomes: list[str] = []
    async with ActorSystem(clock=clock) as system:
        slow = system.spawn(lambda: Gate(release, [], entered), name="slow")
        quick = system.spawn(lambda: Gate(release, []), name="quick")

        async def long_ask() -> None:
            try:
                await slow.ask(Hang(), timeout=30)
                outcomes.append("slow answered")
            except AskTimeout:
                outcomes.append("slow timed out")

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_ask)
            await entered.wait()  # the 30 s ask is registered and its handler waits
            with anyio.fail_after(2), pytest.raises(AskTimeout, match="'quick'.*0.05s"):
                await quick.ask(Hang(), timeout=0.05)
            assert clock.now() == 0.05  # on time, although the timer slept towards 30 s
            release.set()
    assert outcomes == ["slow answered"]


async def test_many_answered_asks_leave_no_pending_deadline_behind() -> None:
    release = anyio.Event()
    async with ActorSystem() as system:
        stuck = system.spawn(lambda: Gate(release, []), name="stuck")
        counter = system.spawn(Counter, name="counter")
        async with anyio.create_task_group() as tg:
            # An unanswered ask with a long deadline keeps the timer asleep: the answered
            # ones behind it must still be compacted away, not pile up.
            tg.start_soon(lambda: stuck.ask(Hang(), timeout=60))
            await anyio.wait_all_tasks_blocked()
            for n in range(5000):
                await counter.ask(Add(n=n))
            assert system.pending_deadlines <= 1024
            release.set()


async def test_ask_without_timeout_waits_and_negative_timeout_is_refused() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        await ref.tell(Add(n=4))
        assert await ref.ask(Get(), timeout=None) == 4
        with pytest.raises(ValueError, match="timeout must be >= 0 seconds or None, got -1"):
            await ref.ask(Get(), timeout=-1)
        assert system.pending_deadlines <= 1


async def test_ask_timeout_zero_times_out_at_once(clock: VirtualClock) -> None:
    release = anyio.Event()
    async with ActorSystem(clock=clock) as system:
        ref = system.spawn(lambda: Gate(release, []), name="gate")
        with anyio.fail_after(2), pytest.raises(AskTimeout):
            await ref.ask(Hang(), timeout=0)
        assert clock.now() == 0.0  # no time passed
        release.set()
