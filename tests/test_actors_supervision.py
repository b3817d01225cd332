"""Supervision: restart with fresh state, restart limit -> escalate, stop, escalate chains.

Restart windows run on a `VirtualClock` (the `clock` fixture): exact, and no real waiting."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actor_fixtures import Add, Crash, Get, settle_until, task_ids, wait_for_cancellation
from kestrel_actors import (
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
from kestrel_actors.testing import VirtualClock

pytestmark = pytest.mark.anyio


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


class Held(Flaky):
    """`Flaky` whose `Crash` waits for `release` before it raises."""

    def __init__(self, built: list[Flaky], release: anyio.Event) -> None:
        super().__init__(built)
        self.release = release

    async def receive(self, message: Msg) -> object:
        if isinstance(message, Crash):
            await self.release.wait()
        return await super().receive(message)


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


async def test_restart_limit_reached_escalates_to_the_system(clock: VirtualClock) -> None:
    built: list[Flaky] = []
    with pytest.raises(EscalationError) as caught:
        async with ActorSystem(clock=clock) as system:
            ref = system.spawn(
                lambda: Flaky(built), name="flaky", policy=Restart(max_restarts=2, within=60)
            )
            for _ in range(2):
                with pytest.raises(AskFailed):
                    await ref.ask(Crash())
                await clock.sleep(29.9)  # failures at 0 and 29.9 s: both restarted
            assert ref.alive
            with pytest.raises(AskFailed):
                await ref.ask(Crash())  # third failure, at 59.8 s: in the window, over the limit
            await wait_for_cancellation()  # cancelled by the escalation
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
        await settle_until(lambda: built.count("parent") == 2)
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
            await wait_for_cancellation()  # cancelled by the escalation
    assert len(failures) == 1
    assert caught.value.actor == "watcher"
    assert isinstance(caught.value.error, ChildFailed)
    assert caught.value.error.child == "watcher/child"
    assert isinstance(caught.value.error.error, RuntimeError)


async def test_stop_policy_stops_the_actor_and_rejects_its_pending_messages() -> None:
    built: list[Flaky] = []
    release = anyio.Event()

    async with ActorSystem() as system:
        ref = system.spawn(lambda: Held(built, release), name="slow", policy=Stop())
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
            await wait_for_cancellation()  # cancelled by the escalation
    assert len(attempts) == 4  # first start + 3 restarts, then escalated


def test_restart_policy_validates_its_bounds() -> None:
    with pytest.raises(ValueError, match="max_restarts must be >= 0"):
        Restart(max_restarts=-1)
    with pytest.raises(ValueError, match="within must be > 0"):
        Restart(within=0)


def test_restart_window_counts_only_recent_restarts() -> None:
    from kestrel_actors.supervision import RestartWindow

    window = RestartWindow(Restart(max_restarts=2, within=10.0))
    assert window.allow(0.0) and window.allow(1.0)
    assert not window.allow(5.0)  # two restarts in the last 10 s already
    assert window.allow(10.5)  # the restart at 0.0 left the window
    assert not window.allow(10.6)  # 1.0 and 10.5 are both within 10 s
    assert window.allow(20.5)  # exactly `within` after 10.5: that restart has left the window
    never = RestartWindow(Restart(max_restarts=0))
    assert not never.allow(0.0) and never.count == 0  # max_restarts=0: escalate at once


class Hold(msgspec.Struct, frozen=True, tag="hold"):
    pass


class Keeper(Actor[Get | Hold]):
    """A child that blocks on `Hold` until cancelled; answers `Get` with its instance id."""

    async def receive(self, message: Get | Hold) -> object:
        if isinstance(message, Hold):
            await anyio.sleep_forever()
        return id(self)


class Supervisor(Actor[Msg]):
    """Spawns a `Keeper` child in `on_start`; `Crash` fails the supervisor itself."""

    def __init__(self, built: list[str]) -> None:
        built.append("supervisor")

    async def on_start(self) -> None:
        self.ctx.spawn(Keeper, name="child")

    async def receive(self, message: Msg) -> object:
        if isinstance(message, Crash):
            raise RuntimeError("supervisor crashed")
        return None


async def test_restarting_a_parent_replaces_its_children_and_fails_their_asks() -> None:
    built: list[str] = []
    outcomes: list[str] = []
    async with ActorSystem() as system:
        parent = system.spawn(lambda: Supervisor(built), name="sup", policy=Restart())
        await anyio.wait_all_tasks_blocked()
        old_child = system.lookup("sup/child")
        assert old_child is not None
        old_id = await old_child.ask(Get())
        await old_child.tell(Hold())  # the child is busy when its parent restarts

        async def ask_old_child() -> None:
            try:
                await old_child.ask(Get(), timeout=30)
                outcomes.append("answered")
            except ActorStopped as exc:
                outcomes.append(str(exc))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_old_child)
            await anyio.wait_all_tasks_blocked()
            with anyio.fail_after(2), pytest.raises(AskFailed, match="supervisor crashed"):
                await parent.ask(Crash())
        await anyio.wait_all_tasks_blocked()
        assert built == ["supervisor", "supervisor"]
        assert not old_child.alive
        new_child = system.lookup("sup/child")
        assert new_child is not None and new_child is not old_child
        assert await new_child.ask(Get()) != old_id
        assert system.actors == ("sup", "sup/child")
    # The ask queued at the old child is rejected, never left hanging.
    assert outcomes == ["actor 'sup/child' is stopped: it stopped before handling this message"]


async def test_escalation_climbs_every_level_to_the_system() -> None:
    class Level(Actor[Msg]):
        def __init__(self, depth: int) -> None:
            self.depth = depth

        async def on_start(self) -> None:
            if self.depth < 2:
                self.ctx.spawn(lambda: Level(self.depth + 1), name="c", policy=Escalate())

        async def receive(self, message: Msg) -> object:
            raise RuntimeError(f"failed at depth {self.depth}")

    before = task_ids()
    with pytest.raises(EscalationError) as caught:
        async with ActorSystem() as system:
            system.spawn(lambda: Level(0), name="top", policy=Escalate())
            await anyio.wait_all_tasks_blocked()
            leaf = system.lookup("top/c/c")
            assert leaf is not None
            with pytest.raises(AskFailed, match="failed at depth 2"):
                await leaf.ask(Crash())
            await wait_for_cancellation()  # cancelled by the escalation
    top = caught.value
    assert top.actor == "top"
    middle = top.error
    assert isinstance(middle, ChildFailed) and middle.child == "top/c"
    inner = middle.error
    assert isinstance(inner, ChildFailed) and inner.child == "top/c/c"
    assert str(inner.error) == "failed at depth 2"
    assert system.actors == ()
    assert task_ids() == before  # nothing leaked


async def test_asks_queued_behind_a_failure_are_answered_by_the_fresh_instance() -> None:
    built: list[Flaky] = []
    release = anyio.Event()

    answers: list[object] = []
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Held(built, release), name="held", policy=Restart())
        await ref.tell(Add(n=3))
        await ref.tell(Crash())  # held until release, then fails
        await anyio.wait_all_tasks_blocked()

        async def ask_get() -> None:
            answers.append(await ref.ask(Get(), timeout=5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_get)  # in flight across the restart
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert answers == [0]  # handled by the fresh instance, not lost, not hung
    assert len(built) == 2


async def test_failures_further_apart_than_the_window_keep_restarting(
    clock: VirtualClock,
) -> None:
    built: list[Flaky] = []
    async with ActorSystem(clock=clock) as system:
        ref = system.spawn(
            lambda: Flaky(built), name="flaky", policy=Restart(max_restarts=1, within=0.05)
        )
        for _ in range(3):
            with pytest.raises(AskFailed):
                await ref.ask(Crash())
            await clock.sleep(0.1)  # the previous restart leaves the 0.05 s window
        assert ref.alive
        assert await ref.ask(Get()) == 0
    assert len(built) == 4  # the original and three restarts, none over the limit
    assert clock.now() == pytest.approx(0.3)


@pytest.mark.parametrize(("gap", "restarts"), [(0.05, True), (0.049, False)])
async def test_the_restart_window_is_sliding_and_closed_at_its_end(
    clock: VirtualClock, gap: float, restarts: bool
) -> None:
    # A restart `within` seconds after the last one is allowed again; one a moment sooner is
    # over the limit (max_restarts=1) and escalates. Exact only on virtual time.
    built: list[Flaky] = []
    failed: list[EscalationError] = []
    try:
        async with ActorSystem(clock=clock) as system:
            ref = system.spawn(
                lambda: Flaky(built), name="flaky", policy=Restart(max_restarts=1, within=0.05)
            )
            with pytest.raises(AskFailed):
                await ref.ask(Crash())  # restart 1 of 1, at 0 s
            await clock.sleep(gap)
            with pytest.raises(AskFailed):
                await ref.ask(Crash())
            await settle_until(lambda: len(built) == 3 or not ref.alive)
    except EscalationError as exc:
        failed.append(exc)
    assert (len(built), bool(failed)) == ((3, False) if restarts else (2, True))
