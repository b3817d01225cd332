"""Abandoned agent calls, defined once for the run:
each abandoned call is recorded exactly once, as `late-reply` when it answered before the end
of the RUN (plus the grace) and as `abandoned` otherwise, on direct, asyncio and trio alike;
and a call that hangs never keeps the process alive after the run, on any path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from kestrel.service.actors.driver import run_simulation
from kestrel.data.sample import load_sample
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage
from kestrel.session.runner import SessionOptions, SessionResult, run_session

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 1.0  # the margins below scale with it: a loaded machine stalls a thread for ~0.1 s
BOUND_S = 10.0  # so a broken runtime fails the test instead of hanging it
PATHS = ("direct", "asyncio", "trio")


class FirstHangsAcrossTheDay:
    """Blocking; one ordinal a day (OPEN). Day 1's call hangs until day 2's call has started
    (so it is still running at the end of day 1, past the grace), then answers; day 2's call
    waits (well inside the timeout) until day 1's has answered, so the late reply exists
    while the run goes on."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True
    agent_id = "first-hangs"
    model = "first-hangs"

    def __init__(self) -> None:
        self.second_started = threading.Event()
        self.first_finished = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()

    def author(self, request: AuthorRequest) -> AgentReply:
        with self._lock:
            self.calls += 1
            n = self.calls
        if n == 1:
            self.second_started.wait(BOUND_S)
            self.first_finished.set()
            return AgentReply("PASS", Usage(input=700, output=30))
        if n == 2:
            self.second_started.set()
            self.first_finished.wait(TIMEOUT / 2)
        return AgentReply("PASS", Usage(input=500, output=20))


class FirstNeverAnswers:
    """Blocking; day 1's call hangs until released (after the run)."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True
    agent_id = "first-never"
    model = "first-never"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()

    def author(self, request: AuthorRequest) -> AgentReply:
        with self._lock:
            self.calls += 1
            n = self.calls
        if n == 1:
            self.release.wait(BOUND_S)
        return AgentReply("PASS", Usage(input=500, output=20))


def run(path: str, agent: FirstHangsAcrossTheDay | FirstNeverAnswers) -> SessionResult:
    data, opts = load_sample(), SessionOptions()
    if path == "direct":
        return run_session(data, agent, opts, agent_timeout=TIMEOUT, days=2)
    return run_simulation(data, agent, opts, backend=path, agent_timeout=TIMEOUT, days=2)


def records(result: SessionResult) -> list[tuple[int, str | None, str, str]]:
    """(day index, call date, ordinal, kind) of every late-reply / abandoned record."""
    return [(k, e.date, e.ordinal, e.kind) for k, d in enumerate(result.days) for e in d.evidence
            if e.kind in ("late-reply", "abandoned")]


@pytest.mark.parametrize("path", PATHS)
def test_a_call_answering_on_the_next_day_is_one_late_reply(path: str) -> None:
    """Before: `abandoned` at the end of day 1 ("by the end of the run") AND a `late-reply`
    during day 2 for the same call."""
    result = run(path, FirstHangsAcrossTheDay())
    day1 = result.days[0].date
    assert records(result) == [(1, day1, "OPEN", "late-reply")]
    (late,) = [e for e in result.evidence if e.kind == "late-reply"]
    assert late.usage.input == 700


@pytest.mark.parametrize("path", PATHS)
def test_a_call_still_running_at_the_end_of_the_run_is_one_abandoned(path: str) -> None:
    agent = FirstNeverAnswers()
    try:
        result = run(path, agent)
    finally:
        agent.release.set()
    day1 = result.days[0].date
    # settled at the end of the RUN, so recorded with the last day, once
    assert records(result) == [(1, day1, "OPEN", "abandoned")]
    (rec,) = [e for e in result.evidence if e.kind == "abandoned"]
    assert rec.reason == f"no answer after the {TIMEOUT:g}s timeout by the end of the run: tokens and cost unknown"


HANG_S = 300.0
EXIT_DEADLINE_S = 90.0  # the imports on a loaded machine; far below the hang

SCRIPT = textwrap.dedent(f"""
    import sys, threading
    from typing import ClassVar
    from kestrel.service.actors.driver import run_simulation
    from kestrel.data.sample import load_sample
    from kestrel.session.protocol import AgentReply, Usage
    from kestrel.session.runner import SessionOptions, run_session

    class Hang:
        iterative: ClassVar[bool] = True
        blocking: ClassVar[bool] = True
        agent_id = "hang"
        model = "hang"

        def __init__(self):
            self.calls = 0

        def author(self, request):
            self.calls += 1
            if self.calls == 1:
                threading.Event().wait({HANG_S})
            return AgentReply("PASS", Usage())

    path, opts = sys.argv[1], SessionOptions(checkpoints=("11:00",))
    if path == "direct":
        result = run_session(load_sample(), Hang(), opts, agent_timeout={TIMEOUT})
    else:
        result = run_simulation(load_sample(), Hang(), opts, backend=path, agent_timeout={TIMEOUT})
    print(sorted(e.kind for e in result.evidence if e.kind == "abandoned"), flush=True)
""")


@pytest.mark.parametrize("path", PATHS)
def test_a_hung_call_never_keeps_the_process_alive(path: str) -> None:
    """Before: on asyncio the abandoned call ran on a non-daemon anyio worker thread, so the
    interpreter exited only when the call ended (here after 300 s)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT, path], cwd=ROOT, capture_output=True, text=True,
                          timeout=EXIT_DEADLINE_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['abandoned']"
    assert time.monotonic() - start < EXIT_DEADLINE_S
