"""The ask hand-off: an idle actor whose handler can never suspend is asked in the asker's task.

What must not change: one message at a time, per-sender FIFO, supervision of a failing
handler, timeouts of handlers that do suspend, context variables staying with the actor.
"""

from __future__ import annotations

import contextvars

import anyio
import msgspec
import pytest
from anyio.lowlevel import checkpoint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_fixtures import Crash, Note, wait_for_cancellation
from kestrel_actors import (
    Actor,
    ActorStopped,
    ActorSystem,
    AskFailed,
    AskTimeout,
    EscalationError,
    Escalate,
    Restart,
    Stop,
)
from kestrel_actors.testing import VirtualClock

pytestmark = pytest.mark.anyio


class WhoRuns(msgspec.Struct, frozen=True, tag="who"):
    pass


Msg = Note | Crash | WhoRuns


class Recorder(Actor[Msg]):
    """Never suspends: records notes in arrival order; `ask` gets the count so far."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.seen: list[tuple[int, int]] = []
        self.log = log
        if log is not None:
            log.append("built")

    async def on_stop(self) -> None:
        if self.log is not None:
            self.log.append("stopped")

    async def receive(self, message: Msg) -> object:
        if isinstance(message, Crash):
            raise ValueError("crashed on purpose")
        if isinstance(message, WhoRuns):
            return anyio.get_current_task().id
        self.seen.append((message.sender, message.seq))
        return len(self.seen)


class SuspendingRecorder(Recorder):
    """The same, but its handler contains an `await` (so it is never handed off)."""

    async def receive(self, message: Msg) -> object:
        if isinstance(message, Crash):
            await checkpoint()
        return await Recorder.receive(self, message)


async def test_idle_never_suspending_actor_is_asked_in_the_askers_task() -> None:
    async with ActorSystem() as system:
        plain = system.spawn(Recorder, name="plain")
        suspending = system.spawn(SuspendingRecorder, name="suspending")
        await anyio.wait_all_tasks_blocked()
        me = anyio.get_current_task().id
        assert await plain.ask(WhoRuns()) == me
        assert await suspending.ask(WhoRuns()) != me


async def test_ask_behind_pending_tells_is_not_handed_off_and_sees_them_all() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder, name="rec")
        await anyio.wait_all_tasks_blocked()
        for seq in range(3):
            ref.tell_nowait(Note(sender=0, seq=seq))
        assert await ref.ask(Note(sender=0, seq=3)) == 4
        assert await ref.ask(WhoRuns()) == anyio.get_current_task().id  # idle again


# function_scoped_fixture: `anyio_backend` is parametrized per test, not per example; each
# example builds its own actor system, so nothing leaks between examples
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plans=st.lists(
        st.lists(st.sampled_from(["tell", "tell_nowait", "ask", "yield"]), max_size=12),
        min_size=1,
        max_size=3,
    ),
    suspending=st.booleans(),
)
async def test_per_sender_fifo_and_counts_hold_with_hand_offs(
    plans: list[list[str]], suspending: bool
) -> None:
    actor_type = SuspendingRecorder if suspending else Recorder
    async with ActorSystem(mailbox=64) as system:
        instances: list[Recorder] = []

        def build() -> Recorder:
            instance = actor_type()
            instances.append(instance)
            return instance

        ref = system.spawn(build, name="rec")

        async def sender(index: int, plan: list[str]) -> None:
            seq = 0
            for step in plan:
                if step == "yield":
                    await checkpoint()
                    continue
                note = Note(sender=index, seq=seq)
                seq += 1
                if step == "tell":
                    await ref.tell(note)
                elif step == "tell_nowait":
                    ref.tell_nowait(note)
                else:
                    count = await ref.ask(note)
                    # Everything this sender sent before was handled first, plus this one.
                    mine = [s for s in instances[0].seen[:count] if s[0] == index]
                    assert mine == [(index, k) for k in range(seq)]

        async with anyio.create_task_group() as tg:
            for index, plan in enumerate(plans):
                tg.start_soon(sender, index, plan)
    handled = instances[0].seen  # the graceful shutdown handled every accepted message
    assert len(instances) == 1
    for index, plan in enumerate(plans):
        sent = sum(step != "yield" for step in plan)
        assert [s for s in handled if s[0] == index] == [(index, k) for k in range(sent)]


async def test_a_handed_off_failure_restarts_before_the_next_message() -> None:
    log: list[str] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Recorder(log), name="rec", policy=Restart(max_restarts=3))
        assert await ref.ask(Note(sender=0, seq=0)) == 1
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(AskFailed) as caught:
            await ref.ask(Crash())
        assert isinstance(caught.value.__cause__, ValueError)
        assert str(caught.value) == (
            "actor 'rec' failed handling a 'crash' message: ValueError: crashed on purpose"
        )
        ref.tell_nowait(Note(sender=0, seq=1))  # queued before the actor task supervises
        assert await ref.ask(Note(sender=0, seq=2)) == 2  # fresh state: seq 1 and 2 only
        assert log == ["built", "stopped", "built"]


async def test_a_handed_off_failure_with_stop_rejects_what_follows() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder, name="rec", policy=Stop())
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(AskFailed):
            await ref.ask(Crash())
        await ref.wait_stopped()
        with pytest.raises(ActorStopped):
            await ref.ask(Note(sender=0, seq=0))


async def test_a_handed_off_failure_with_escalate_fails_the_system() -> None:
    with pytest.raises(EscalationError):
        async with ActorSystem() as system:
            ref = system.spawn(Recorder, name="rec", policy=Escalate())
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(AskFailed):
                await ref.ask(Crash())
            await wait_for_cancellation()  # cancelled by the escalation


async def test_a_suspending_handler_still_times_out_on_time(clock: VirtualClock) -> None:
    class Slow(Actor[Note]):
        async def receive(self, message: Note) -> object:
            await self.ctx.system.clock.sleep(10)
            return None

    async with ActorSystem(grace=0.1, clock=clock) as system:
        ref = system.spawn(Slow, name="slow")
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(2):
            with pytest.raises(AskTimeout):
                await ref.ask(Note(sender=0, seq=0), timeout=0.05)
        assert clock.now() == 0.05
    # The shutdown's grace, not the handler's 10 s sleep, ended the handler.
    assert clock.now() == pytest.approx(0.15)


LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("LABEL", default="unset")


async def test_a_handed_off_handler_keeps_its_context_variables_to_the_actor() -> None:
    class Labeller(Actor[Note]):
        async def on_start(self) -> None:
            LABEL.set("actor")

        async def receive(self, message: Note) -> object:
            seen = LABEL.get()
            LABEL.set(f"handled {message.seq}")
            return seen

    async with ActorSystem() as system:
        ref = system.spawn(Labeller, name="labeller")
        await anyio.wait_all_tasks_blocked()
        LABEL.set("asker")
        assert await ref.ask(Note(sender=0, seq=0)) == "actor"
        assert await ref.ask(Note(sender=0, seq=1)) == "handled 0"
        assert LABEL.get() == "asker"
