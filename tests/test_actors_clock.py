"""The runtime's clocks: `EventLoopClock` (the default) and `VirtualClock` (virtual time)."""

from __future__ import annotations

import anyio
import pytest

from kestrel_actors import ActorSystem, Clock, EventLoopClock
from kestrel_actors.testing import VirtualClock

pytestmark = pytest.mark.anyio


async def test_the_default_clock_is_the_event_loops() -> None:
    clock = EventLoopClock()
    assert abs(clock.now() - anyio.current_time()) < 1.0
    with clock.move_on_at(clock.now()) as scope:  # already due: cancelled at once
        await anyio.sleep_forever()
    assert scope.cancelled_caught
    async with ActorSystem() as system:
        assert isinstance(system.clock, EventLoopClock)


async def test_sleepers_wake_in_deadline_order_each_at_its_own_deadline(
    clock: VirtualClock,
) -> None:
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    async with anyio.create_task_group() as tg:
        for name, seconds in (("c", 3.0), ("a", 1.0), ("b", 2.0), ("a2", 1.0)):
            tg.start_soon(sleeper, name, seconds)
    # Tied sleepers wake together; the scheduler picks which runs first (trio shuffles).
    assert sorted(woke[:2]) == [("a", 1.0), ("a2", 1.0)]
    assert woke[2:] == [("b", 2.0), ("c", 3.0)]
    assert clock.now() == 3.0 and clock.jumps == 3  # one jump per distinct deadline


async def test_a_woken_task_runs_before_time_moves_again(clock: VirtualClock) -> None:
    seen: list[float] = []

    async def chain() -> None:
        await clock.sleep(1.0)
        seen.append(clock.now())
        await clock.sleep(0.5)  # registered at 1.0, due at 1.5: before the other at 2.0
        seen.append(clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(chain)
        tg.start_soon(clock.sleep, 2.0)
    assert seen == [1.0, 1.5] and clock.now() == 2.0


async def test_move_on_at_cancels_at_its_deadline_and_drops_its_timer_when_left(
    clock: VirtualClock,
) -> None:
    with clock.move_on_at(5.0) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught and clock.now() == 5.0
    with clock.move_on_at(9.0) as early:
        await clock.sleep(1.0)
    assert not early.cancelled_caught and clock.now() == 6.0
    assert clock.pending_timers == 0  # the scope's timer left with it: no jump to 9.0
    with clock.move_on_at(clock.now()) as due:  # already due: cancelled at once
        await anyio.sleep_forever()
    assert due.cancelled_caught and clock.now() == 6.0
    await clock.sleep_until(1.0)  # in the past: returns at once
    assert clock.now() == 6.0


async def test_advance_by_hand_fires_each_timer_at_its_own_deadline() -> None:
    async with VirtualClock(start=100.0, autojump=False) as clock:
        woke: list[float] = []

        async def sleeper(seconds: float) -> None:
            await clock.sleep(seconds)
            woke.append(clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper, 1.0)
            tg.start_soon(sleeper, 3.0)
            await anyio.wait_all_tasks_blocked()
            assert woke == [] and clock.pending_timers == 2  # no autojump: nothing moves
            await clock.advance(2.0)
            assert woke == [101.0] and clock.now() == 102.0
            await clock.advance(5.0)
        assert woke == [101.0, 103.0] and clock.now() == 107.0
        with pytest.raises(ValueError, match="advances by >= 0 seconds, got -1"):
            await clock.advance(-1)


async def test_a_virtual_clock_is_a_clock_and_the_body_error_propagates_unwrapped() -> None:
    clock: Clock = VirtualClock()
    assert clock.now() == 0.0
    with pytest.raises(KeyError, match="boom"):
        async with VirtualClock():
            raise KeyError("boom")
    entered = VirtualClock()
    async with entered:
        with pytest.raises(RuntimeError, match="entered only once"):
            await entered.__aenter__()


async def test_a_long_ask_timeout_takes_no_real_time(clock: VirtualClock) -> None:
    from actor_fixtures import Gate, Hang

    from kestrel_actors import AskTimeout

    release = anyio.Event()
    started = anyio.current_time()
    async with ActorSystem(clock=clock) as system:
        ref = system.spawn(lambda: Gate(release, []), name="gate")
        with pytest.raises(AskTimeout, match="after 3600s"):
            await ref.ask(Hang(), timeout=3600)
        assert clock.now() == 3600.0
        release.set()
    assert anyio.current_time() - started < 30  # an hour of virtual time, no hour of waiting
