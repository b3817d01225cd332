"""Actor runtime throughput against raw anyio streams, on asyncio and trio.

Prints one JSON line. Per backend (suffix `_asyncio` / `_trio`):
- `floor_per_s`: raw memory-object-stream producer -> consumer, the consumer draining with
  `receive_nowait()` until it would block before awaiting again (the batched floor);
- `naive_per_s`: the same with one `await receive()` per message (for reference);
- `tell_per_s`: actor `tell` messages/s through a mailbox into a counting actor;
- `ask_per_s`: `ask` round trips/s to an idle counting actor (its handler never suspends, so
  `ask` hands off: the handler runs in the asker's task); `pingpong_per_s`: raw two-stream
  ping-pong round trips/s;
- `ask_mailbox_per_s`: the same asks to an actor whose handler contains an `await`, so each
  one goes through the mailbox to the actor's task and back (no hand-off);
- `fanout_per_s`: bus deliveries/s, one publisher to 3 counting actor subscribers (`block`);
- ratios `tell_ratio` = tell/floor and `ask_ratio` = ask/pingpong.
And `trio_vs_asyncio_<figure>`: trio's figure over asyncio's, for the raw rates
(`tell_per_s`, `ask_per_s`, `ask_mailbox_per_s`, `fanout_per_s`) and for the ratios
(`tell_ratio`, `ask_ratio`).
Each figure is the best of a few repeats. `--quick` keeps the whole run under 20 s.
`--clock cpu` times with process CPU time instead of the wall clock: every figure is a
single-threaded loop that never sleeps, so on an idle machine both agree, and on a shared
one CPU time leaves out the time other processes held the core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec
from anyio import EndOfStream, WouldBlock
from anyio.lowlevel import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel_actors import Actor, ActorSystem  # noqa: E402

CAPACITY = 1024

clock = time.perf_counter
"""The timer of every figure: wall clock by default, process CPU time with `--clock cpu`."""


class Tick(msgspec.Struct, frozen=True, tag="tick"):
    seq: int


class Done(msgspec.Struct, frozen=True, tag="done"):
    pass


MESSAGE = Tick(seq=1)


async def floor(n: int) -> float:
    send, recv = anyio.create_memory_object_stream[Tick](CAPACITY)

    async def consume() -> None:
        count = 0
        while True:
            try:
                recv.receive_nowait()
                count += 1
                continue
            except WouldBlock:
                pass
            except EndOfStream:
                break
            try:
                await recv.receive()
                count += 1
            except EndOfStream:
                break
        assert count == n

    start = clock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        async with send:
            for _ in range(n):
                try:
                    send.send_nowait(MESSAGE)
                except WouldBlock:
                    await send.send(MESSAGE)
    return n / (clock() - start)


async def naive(n: int) -> float:
    send, recv = anyio.create_memory_object_stream[Tick](CAPACITY)

    async def consume() -> None:
        async with recv:
            async for _ in recv:
                pass

    start = clock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        async with send:
            for _ in range(n):
                await send.send(MESSAGE)
    return n / (clock() - start)


async def pingpong(n: int) -> float:
    ping_send, ping_recv = anyio.create_memory_object_stream[Tick](1)
    pong_send, pong_recv = anyio.create_memory_object_stream[Tick](1)

    async def ponger() -> None:
        async with ping_recv, pong_send:
            async for message in ping_recv:
                await pong_send.send(message)

    start = clock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ponger)
        async with ping_send:
            for _ in range(n):
                await ping_send.send(MESSAGE)
                await pong_recv.receive()
    return n / (clock() - start)


class Counter(Actor[Tick | Done]):
    """Counts ticks; sets `finished` when told `Done`; answers an asked tick with itself."""

    def __init__(self, finished: anyio.Event | None = None) -> None:
        self.count = 0
        self.finished = finished

    async def receive(self, message: Tick | Done) -> object:
        if type(message) is Tick:
            self.count += 1
            return message
        if self.finished is not None:
            self.finished.set()
        return self.count


async def tell(n: int) -> float:
    finished = anyio.Event()
    async with ActorSystem(mailbox=CAPACITY) as system:
        ref = system.spawn(lambda: Counter(finished), name="counter")
        start = clock()
        for _ in range(n):
            await ref.tell(MESSAGE)
        await ref.tell(Done())
        await finished.wait()
        elapsed = clock() - start
    return n / elapsed


class AwaitingCounter(Counter):
    """`Counter` with an `await` in its handler (never taken): asks to it are not handed off."""

    async def receive(self, message: Tick | Done) -> object:
        if self.finished is not None and self.finished.is_set():
            await checkpoint()
        return await Counter.receive(self, message)


async def ask(n: int, factory: Callable[[], Counter] = Counter) -> float:
    async with ActorSystem(mailbox=CAPACITY) as system:
        ref = system.spawn(factory, name="counter")
        start = clock()
        for _ in range(n):
            await ref.ask(MESSAGE)
        elapsed = clock() - start
    return n / elapsed


async def fanout(n: int, subscribers: int = 3) -> float:
    async with ActorSystem(mailbox=CAPACITY) as system:
        events = [anyio.Event() for _ in range(subscribers)]
        for i, event in enumerate(events):
            ref = system.spawn(lambda e=event: Counter(e), name=f"sub{i}")  # type: ignore[misc]
            system.bus.subscribe("ticks", ref)
        bus = system.bus
        start = clock()
        for _ in range(n):
            await bus.publish("ticks", MESSAGE)
        await bus.publish("ticks", Done())
        for event in events:
            await event.wait()
        elapsed = clock() - start
    return n * subscribers / elapsed


async def best(fn: Callable[[int], Awaitable[float]], n: int, repeats: int) -> float:
    return max([await fn(n) for _ in range(repeats)])


def run_backend(backend: str, quick: bool) -> dict[str, float]:
    scale = 1 if quick else 5
    repeats = 5 if quick else 7
    stream_n, ask_n, fan_n = 100_000 * scale, 10_000 * scale, 50_000 * scale

    async def main() -> dict[str, float]:
        figures = {
            "floor_per_s": await best(floor, stream_n, repeats),
            "naive_per_s": await best(naive, stream_n // 4, repeats),
            "tell_per_s": await best(tell, stream_n, repeats),
            "pingpong_per_s": await best(pingpong, ask_n, repeats),
            "ask_per_s": await best(ask, ask_n, repeats),
            "ask_mailbox_per_s": await best(
                lambda n: ask(n, AwaitingCounter), ask_n, repeats
            ),
            "fanout_per_s": await best(fanout, fan_n, repeats),
        }
        figures["tell_ratio"] = figures["tell_per_s"] / figures["floor_per_s"]
        figures["ask_ratio"] = figures["ask_per_s"] / figures["pingpong_per_s"]
        return figures

    return anyio.run(main, backend=backend)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller runs (under 20 s in total)")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="time figures by the wall clock (default) or by process CPU time",
    )
    args = parser.parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    started = time.perf_counter()
    result: dict[str, object] = {
        "bench": "bus_throughput", "quick": args.quick, "clock": args.clock,
    }
    per_backend = {backend: run_backend(backend, args.quick) for backend in ("asyncio", "trio")}
    for backend, figures in per_backend.items():
        for key, value in figures.items():
            result[f"{key}_{backend}"] = round(value, 3) if "ratio" in key else round(value)
    for key in (
        "tell_per_s", "ask_per_s", "ask_mailbox_per_s", "fanout_per_s", "tell_ratio", "ask_ratio",
    ):
        trio, aio = per_backend["trio"][key], per_backend["asyncio"][key]
        result[f"trio_vs_asyncio_{key}"] = round(trio / aio, 3)
    result["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
