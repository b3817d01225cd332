"""`python -m kestrel_actors.demo`: an actor exchange and a bus fan-out, printed step by step.

Everything printed comes from the main task after an `ask` has synchronised with the
actors, so the output is byte-identical on every run and on both backends
(`--backend asyncio|trio`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import anyio
import msgspec
import structlog

from kestrel_actors import (
    Actor,
    ActorSystem,
    AskFailed,
    BusActor,
    BusStats,
    Codec,
    GetStats,
    Restart,
    SlowPolicy,
)


class Ping(msgspec.Struct, frozen=True, tag="ping"):
    seq: int


class Pong(msgspec.Struct, frozen=True, tag="pong"):
    seq: int
    by: str


class Fill(msgspec.Struct, frozen=True, tag="fill"):
    seq: int
    qty: int
    price: float


class Report(msgspec.Struct, frozen=True, tag="report"):
    pass


class Crash(msgspec.Struct, frozen=True, tag="crash"):
    pass


class Ponger(Actor[Ping | Crash | Report]):
    """Answers each ping; counts the pings it has seen since it (re)started."""

    def __init__(self) -> None:
        self.seen = 0

    async def receive(self, message: Ping | Crash | Report) -> object:
        if isinstance(message, Ping):
            self.seen += 1
            return Pong(seq=message.seq, by=self.ctx.name)
        if isinstance(message, Report):
            return self.seen
        raise RuntimeError("asked to crash")


class Position(Actor[Fill | Report]):
    """Bus subscriber: keeps a running position from the fills it receives."""

    def __init__(self) -> None:
        self.qty = 0
        self.seqs: list[int] = []

    async def receive(self, message: Fill | Report) -> object:
        if isinstance(message, Fill):
            self.qty += message.qty
            self.seqs.append(message.seq)
            return None
        return (self.qty, tuple(self.seqs))


async def run(out: TextIO) -> None:
    codec = Codec([Ping, Pong, Fill])

    def say(line: str = "") -> None:
        print(line, file=out)

    async with ActorSystem() as system:
        say("== actor exchange ==")
        ponger = system.spawn(Ponger, name="ponger", policy=Restart(max_restarts=2, within=60))
        for seq in (1, 2, 3):
            pong = await ponger.ask(Ping(seq=seq), expect=Pong)
            say(f"main -> ponger  {codec.encode(Ping(seq=seq)).decode()}")
            say(f"ponger -> main  {codec.encode(pong).decode()}")
        say(f"ponger has seen {await ponger.ask(Report())} pings")

        say()
        say("== supervision ==")
        try:
            await ponger.ask(Crash())
        except AskFailed as exc:
            say(f"ask failed: {exc}")
        say(f"ponger restarted with fresh state: has seen {await ponger.ask(Report())} pings")

        say()
        say("== bus fan-out: topic 'fills' to 3 subscribers ==")
        bus = system.bus
        books = [system.spawn(Position, name=name) for name in ("risk", "ledger")]
        for book in books:
            bus.subscribe("fills", book)
        tape = bus.subscribe_stream("fills", policy=SlowPolicy.DROP_OLDEST, capacity=2)
        fills = [Fill(seq=1, qty=100, price=182.4), Fill(seq=2, qty=-40, price=182.9),
                 Fill(seq=3, qty=25, price=182.7), Fill(seq=4, qty=-60, price=183.1)]
        for fill in fills:
            delivered = await bus.publish("fills", fill)
            say(f"published {codec.encode(fill).decode()} to {delivered} subscribers")
        for book in books:
            qty, seqs = await book.ask(Report())
            label = f"{book.name} (block)"
            say(f"{label:<26} got fills {list(seqs)}, position {qty}")
        kept = [(await tape.receive()).seq for _ in range(tape.pending)]
        label = "tape (drop_oldest, cap 2)"
        say(f"{label:<26} got fills {kept}, dropped {tape.drops}")

        say()
        say("== bus control by message (GetStats to the bus actor) ==")
        control = system.spawn(lambda: BusActor(bus), name="bus")
        stats = await control.ask(GetStats(), expect=BusStats)
        for sub in stats.subscriptions:
            say(f"{sub.topic}: {sub.subscriber:<9} {sub.policy.value:<11} "
                f"capacity {sub.capacity:<5} pending {sub.pending} drops {sub.drops}")

        say()
        say("== shutdown ==")
        say(f"stopping {len(system.actors)} actors: {', '.join(system.actors)}")
    say(f"stopped; actors left: {len(system.actors)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kestrel_actors.demo", description=__doc__)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    structlog.configure(  # the application's choice; the runtime itself configures nothing
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
    )
    anyio.run(run, sys.stdout, backend=args.backend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
