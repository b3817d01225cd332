"""Supervision: restart with fresh state, restart limit -> escalate, stop, escalate chains."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actors import (
    Actor,
    ActorStopped,
    ActorSystem,
    AskFailed,
    ChildFailed,
    Escalate,
    EscalationError,
    Restart,
    Stop,
)

pytestmark = pytest.mark.anyio


class Add(msgspec.Struct, frozen=True, tag="add"):
    n: int


class Get(msgspec.Struct, frozen=True, tag="get"):
    pass


class Crash(msgspec.Struct, frozen=True, tag="crash"):
    pass


Msg = Add | Get | Crash


class Flaky(Actor[Msg]):
    """Counts `Add`s; raises on `Crash`. Records each instance built (fresh state check)."""

    built: list[Flaky]

    def __init__(self, built: list[Flaky]) -> None:
        self.total = 0
        built.append(self)

    async def receive(self, message: Msg) -> object:
        if isinstance(message, Add):
            self.total += message.n
            return None
        if isinstance(message, Get):
            return self.total
        raise RuntimeError("crashed on purpose")


async def test_restart_gives_fresh_state_from_the_factory_and_keeps_serving() -> None:
    built: list[Flaky] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Flaky(built), name="flaky", policy=Restart(max_restarts=2))
        await ref.tell(Add(n=5))
        assert await ref.ask(Get()) == 5
        with pytest.raises(AskFailed, match="crashed on purpose"):
            await ref.ask(Crash())
        assert await ref.ask(Get()) == 0  # fresh state after the restart
        await ref.tell(Add(n=2))
        assert await ref.ask(Get()) == 2
    assert len(built) == 2


async def test_messages_queued_behind_a_failure_survive_the_restart() -> None:
    built: list[Flaky] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Flaky(built), name="flaky", policy=Restart())
        ref.tell_nowait(Add(n=1))
        ref.tell_nowait(Crash())
        ref.tell_nowait(Add(n=10))
        ref.tell_nowait(Add(n=20))
        assert await ref.ask(Get()) == 30  # the failing message is dropped, later ones kept


async def test_restart_limit_reached_escalates_to_the_system() -> None:
    built: list[Flaky] = []
    with pytest.raises(EscalationError) as caught:
        async with ActorSystem() as system:
            ref = system.spawn(
                lambda: Flaky(built), name="flaky", policy=Restart(max_restarts=2, within=60)
            )
            for _ in range(2):
                with pytest.raises(AskFailed):
                    await ref.ask(Crash())
            with pytest.raises(AskFailed):
                await ref.ask(Crash())  # third failure in the window: over the limit
            await anyio.sleep(10)  # cancelled by the escalation
    assert caught.value.actor == "flaky"
    assert isinstance(caught.value.error, RuntimeError)
    assert len(built) == 3  # the original and two restarts, no third


class Parent(Actor[Msg]):
    """Spawns a child with a given policy; forwards `Crash` to it. Counts its own builds."""

    def __init__(self, built: list[str], child_policy: Restart | Stop | Escalate) -> None:
        self.built = built
        self.child_policy = child_policy
        built.append("parent")

    async def on_start(self) -> None:
        child_built: list[Flaky] = []
        self.ctx.spawn(lambda: Flaky(child_built), name="child", policy=self.child_policy)

    async def receive(self, message: Msg) -> object:
        child = self.ctx.system.lookup(f"{self.ctx.name}/child")
        if isinstance(message, Get):
            return child is not None
        assert child is not None
        await child.tell(message)
        return None


async def test_child_restart_limit_escalates_to_the_parent_which_restarts() -> None:
    built: list[str] = []
    async with ActorSystem() as system:
        parent = system.spawn(
            lambda: Parent(built, Restart(max_restarts=1)), name="parent", policy=Restart()
        )
        assert await parent.ask(Get()) is True
        child = system.lookup("parent/child")
        assert child is not None
        with pytest.raises(AskFailed):
            await child.ask(Crash())  # restart 1 of 1
        with pytest.raises(AskFailed):
            await child.ask(Crash())  # over the limit: escalate to the parent
        with anyio.fail_after(2):
            await child.wait_stopped()
            while built.count("parent") < 2:
                await anyio.sleep(0.01)
        # The parent was restarted by its own policy: fresh instance, which spawned a new child.
        assert await parent.ask(Get()) is True
        assert system.lookup("parent/child") is not None
        assert system.lookup("parent/child") is not child


async def test_escalate_policy_reaches_the_parent_as_child_failed() -> None:
    failures: list[BaseException] = []

    class Watcher(Actor[Msg]):
        async def on_start(self) -> None:
            self.ctx.spawn(lambda: Flaky([]), name="child", policy=Escalate())

        async def receive(self, message: Msg) -> object:
            return None

    with pytest.raises(EscalationError) as caught:
        async with ActorSystem() as system:
            system.spawn(Watcher, name="watcher", policy=Escalate())
            await anyio.wait_all_tasks_blocked()
            child = system.lookup("watcher/child")
            assert child is not None
            try:
                await child.ask(Crash())
            except AskFailed as exc:
                failures.append(exc)
            await anyio.sleep(10)  # cancelled by the escalation
    assert len(failures) == 1
    assert caught.value.actor == "watcher"
    assert isinstance(caught.value.error, ChildFailed)
    assert caught.value.error.child == "watcher/child"
    assert isinstance(caught.value.error.error, RuntimeError)


async def test_stop_policy_stops_the_actor_and_rejects_its_pending_messages() -> None:
    built: list[Flaky] = []
    release = anyio.Event()

    class Slow(Flaky):
        async def receive(self, message: Msg) -> object:
            if isinstance(message, Crash):
                await release.wait()
            return await super().receive(message)

    async with ActorSystem() as system:
        ref = system.spawn(lambda: Slow(built), name="slow", policy=Stop())
        results: list[str] = []

        async def ask_get() -> None:
            try:
                await ref.ask(Get())
                results.append("answered")
            except ActorStopped as exc:
                results.append(f"rejected: {exc}")

        async with anyio.create_task_group() as tg:
            await ref.tell(Crash())
            await anyio.wait_all_tasks_blocked()
            ref.tell_nowait(Add(n=1))
            tg.start_soon(ask_get)
            await anyio.wait_all_tasks_blocked()
            release.set()
        await ref.wait_stopped()
        assert not ref.alive
        assert system.rejected == 1  # the pending Add
    assert results == ["rejected: actor 'slow' is stopped: it stopped before handling this message"]
    assert len(built) == 1  # never restarted


async def test_failing_on_start_is_supervised_like_a_failing_handler() -> None:
    attempts: list[int] = []

    class BadStart(Actor[Get]):
        async def on_start(self) -> None:
            attempts.append(1)
            raise OSError("cannot open the feed")

        async def receive(self, message: Get) -> object:
            return None

    with pytest.raises(EscalationError, match="cannot open the feed"):
        async with ActorSystem() as system:
            system.spawn(BadStart, name="bad", policy=Restart(max_restarts=3))
            await anyio.sleep(10)
    assert len(attempts) == 4  # first start + 3 restarts, then escalated


def test_restart_policy_validates_its_bounds() -> None:
    with pytest.raises(ValueError, match="max_restarts must be >= 0"):
        Restart(max_restarts=-1)
    with pytest.raises(ValueError, match="within must be > 0"):
        Restart(within=0)


def test_restart_window_counts_only_recent_restarts() -> None:
    from actors.supervision import RestartWindow

    window = RestartWindow(Restart(max_restarts=2, within=10.0))
    assert window.allow(0.0) and window.allow(1.0)
    assert not window.allow(5.0)  # two restarts in the last 10 s already
    assert window.allow(10.5)  # the restart at 0.0 left the window
    assert not window.allow(10.6)  # 1.0 and 10.5 are both within 10 s
