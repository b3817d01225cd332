"""Pacing: the feed releases ticks by the wall clock; the ledger never depends on the pace."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

from kestrel_actors import Actor
from kestrel.service.actors.driver import simulate
from kestrel.service.actors.engine import TickBatch
from kestrel.service.actors.feed import Pace
from kestrel.agents.baseline import BaselineAgent
from kestrel.agents.fixed import FixedAgent
from kestrel.cli import main
from kestrel.data import load_sample
from kestrel.session.pace import PaceError, pace_name, parse_pace
from kestrel.session.protocol import AgentReply, AuthorRequest
from kestrel.session.runner import SessionOptions, run_session, session_days

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
CHECKS = ("11:00", "13:30")
SPEED = 40_000.0  # the 6.5 h sample day in about 0.6 s


@pytest.mark.parametrize(("text", "factor"), [("max", None), ("MAX", None), ("realtime", 1.0), (" 60 ", 60.0), ("0.5", 0.5)])
def test_pace_words_and_factors(text: str, factor: float | None) -> None:
    assert parse_pace(text) == factor


@pytest.mark.parametrize("text", ["", "fast", "0", "-3", "nan", "inf", "1e12"])
def test_bad_paces_are_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(PaceError, match="pace"):
        parse_pace(text)


def test_pace_names_are_canonical() -> None:
    assert [pace_name(parse_pace(t)) for t in ("max", "realtime", "60", "2.50")] == ["max", "realtime", "60", "2.5"]


class Timed:
    """A fixed plan at OPEN, PASS after; records the wall clock of every ask."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False
    agent_id = "timed"
    model = ""

    def __init__(self) -> None:
        self.inner = FixedAgent(ORB)
        self.asked: list[tuple[str, float]] = []

    def author(self, request: AuthorRequest) -> AgentReply:
        self.asked.append((request.ordinal, time.monotonic()))
        return self.inner.author(request)


@pytest.mark.anyio
async def test_a_paced_run_asks_at_the_real_ordinals_and_keeps_the_ledger(anyio_backend: str) -> None:
    data = load_sample()
    options = SessionOptions(checkpoints=CHECKS)
    reference = run_session(data, FixedAgent(ORB), options)
    agent = Timed()
    start = time.monotonic()
    paced = await simulate(data, agent, options, pace=Pace(SPEED))
    assert paced.ledger_jsonl() == reference.ledger_jsonl()
    assert paced.capture_jsonl().replace(b'"timed"', b'"fixed:fixed"') == reference.capture_jsonl()
    day = session_days(data, options)[0]
    open_ns = day.session.open_ns
    assert [o for o, _ in agent.asked] == ["OPEN", *CHECKS]
    for (label, when), o in zip(agent.asked, day.ordinals, strict=True):
        due = max(0, day.cutoff(o) - open_ns) / 1e9 / SPEED  # wall seconds after the start
        assert when - start >= due - 0.005, f"{label} asked {when - start:.3f}s in, due at {due:.3f}s"
    last_tick = int(day.ticks.ts[-1])
    assert time.monotonic() - start >= (last_tick - open_ns) / 1e9 / SPEED - 0.005


@pytest.mark.anyio
async def test_a_resumed_pace_keeps_the_ledger(anyio_backend: str) -> None:
    data = load_sample()
    options = SessionOptions(checkpoints=CHECKS)
    day = session_days(data, options)[0]
    crash = day.cutoff(day.ordinals[2])  # ticks before 13:25 go at once, then the pace
    reference = run_session(data, BaselineAgent(), options)
    paced = await simulate(data, BaselineAgent(), options, pace=Pace(SPEED, resume_ns=crash))
    assert paced.ledger_jsonl() == reference.ledger_jsonl()


def test_simulate_pace_flag_same_ledger_as_max(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--checkpoints", "11:00,13:30", "--json"]
    assert main([*args, "--ledger", str(tmp_path / "max.jsonl")]) == 0
    assert main([*args, "--pace", "40000", "--backend", "trio", "--ledger", str(tmp_path / "paced.jsonl")]) == 0
    assert (tmp_path / "max.jsonl").read_bytes() == (tmp_path / "paced.jsonl").read_bytes()
    import json

    def results(line: str) -> object:  # engine_ticks counts the path per batch: it may differ
        doc = json.loads(line)
        doc.pop("engine_ticks", None)
        for d in doc["days"]:
            d.pop("engine_ticks", None)
        return doc

    out = capsys.readouterr().out.splitlines()
    assert results(out[0]) == results(out[1])  # nor does the summary


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--pace", "soon"], "pace must be max, realtime or a factor"),
        (["--pace", "60", "--backend", "direct"], "--pace needs the actor feed"),
    ],
)
def test_simulate_refuses_bad_pacing(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_pace_is_validated_by_the_feed() -> None:
    from kestrel.service.actors.feed import FeedActor

    with pytest.raises(ValueError, match="pace speed must be > 0"):
        FeedActor([], None, pace=Pace(0.0))  # type: ignore[arg-type]


def test_pacing_survives_the_runner_import_graph() -> None:
    # kestrel/ stays free of anyio: the pace parser is pure
    import kestrel.session.pace as pace

    assert "anyio" not in pace.__dict__ and anyio is not None


class Collect(Actor[TickBatch]):
    """Stands where the engine stands: notes when each batch arrives (on the system's clock)."""

    def __init__(self, seen: list[tuple[float, int, int]]) -> None:
        self.seen = seen

    async def receive(self, message: TickBatch) -> None:
        t = message.ticks()
        self.seen.append((self.ctx.system.clock.now(), int(t.ts[0]), int(t.ts[-1])))


async def test_realtime_pace_releases_every_tick_at_its_market_time_on_virtual_time(anyio_backend: str) -> None:
    from kestrel_actors import ActorSystem
    from kestrel.service.actors.feed import AdvanceTo, FeedActor, LoadDay
    from kestrel_actors.testing import VirtualClock

    data = load_sample()
    day = session_days(data, SessionOptions(checkpoints=CHECKS))[0]
    open_ns = day.session.open_ns
    seen: list[tuple[float, int, int]] = []
    async with VirtualClock() as clock, ActorSystem(clock=clock) as system:
        sink = system.spawn(lambda: Collect(seen), name="engine")
        feed = system.spawn(lambda: FeedActor([day], sink, pace=Pace(1.0)), name="feed")
        await feed.ask(LoadDay(0), timeout=None)
        answered = []
        for k in range(day.stretches):
            await feed.ask(AdvanceTo(k), timeout=None)
            answered.append(clock.now())
        await anyio.wait_all_tasks_blocked()
    assert sum(1 for _ in seen) > 100  # released bit by bit, not in one go
    for at, first, last in seen:  # never early, and at most one pacing step late
        assert (first - open_ns) / 1e9 <= at + 1e-6
        assert (last - open_ns) / 1e9 <= at + 1e-6
        assert at - (last - open_ns) / 1e9 <= 0.006 + 1e-6
    for i, o in enumerate(day.ordinals[1:], start=1):  # each cutoff and ordinal time at its real time
        assert answered[2 * i] == pytest.approx((day.cutoff(o) - open_ns) / 1e9, abs=1e-6)
        assert answered[2 * i + 1] == pytest.approx((o.time_ns - open_ns) / 1e9, abs=1e-6)
    assert answered[-1] == pytest.approx((int(day.ticks.ts[-1]) - open_ns) / 1e9, abs=0.006)
    assert answered[-1] > 6 * 3600  # a whole 6.5 h session, in no real time
