"""Shared fixtures of the actor tests: messages, small actors, the virtual clock, task helpers.

Imported by tests/test_actors_*.py (a helper module, not a test module: no test imports
another test module). The `clock` fixture is registered for every test by tests/conftest.py
(`pytest_plugins`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import msgspec
import pytest

from kestrel_actors import Actor
from kestrel_actors.testing import VirtualClock


class Add(msgspec.Struct, frozen=True, tag="add"):
    n: int


class Get(msgspec.Struct, frozen=True, tag="get"):
    pass


class Hang(msgspec.Struct, frozen=True, tag="hang"):
    pass


class Crash(msgspec.Struct, frozen=True, tag="crash"):
    pass


class Note(msgspec.Struct, frozen=True, tag="note"):
    sender: int
    seq: int


class Gate(Actor[Add | Hang]):
    """Handles `Hang` by waiting for `release` (setting `entered` first); records every `Add`."""

    def __init__(
        self, release: anyio.Event, seen: list[int], entered: anyio.Event | None = None
    ) -> None:
        self.release = release
        self.seen = seen
        self.entered = entered

    async def receive(self, message: Add | Hang) -> None:
        if isinstance(message, Hang):
            if self.entered is not None:
                self.entered.set()
            await self.release.wait()
        else:
            self.seen.append(message.n)


def task_ids() -> set[tuple[int, str | None]]:
    """The running tasks of the event loop (a test compares them before and after)."""
    return {(task.id, task.name) for task in anyio.get_running_tasks()}


async def settle_until(condition: Callable[[], bool], *, limit: float = 5.0) -> None:
    """Let every task run until `condition()` holds (fails after `limit` real seconds)."""
    with anyio.fail_after(limit):
        while not condition():
            await anyio.wait_all_tasks_blocked()
            if not condition():
                await anyio.sleep(0)


async def wait_for_cancellation(*, limit: float = 10.0) -> None:
    """Block until the enclosing scope is cancelled (an escalation aborting the system does);
    raises `TimeoutError` after `limit` real seconds if nothing cancels it."""
    with anyio.fail_after(limit):
        await anyio.sleep_forever()


@pytest.fixture
async def clock() -> AsyncIterator[VirtualClock]:
    """A `VirtualClock` at 0.0 with its autojump running: pass it as `ActorSystem(clock=...)`."""
    async with VirtualClock() as virtual:
        yield virtual
