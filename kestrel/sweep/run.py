"""Running a sweep: keys, resumption, injected executors, the results table.

`run_sweep(specs, out, executor=...)` keys every run, skips the keys already finished under
`out/runs/` (a rerun after a crash or Ctrl-C resumes), hands the rest to `executor` (any
`concurrent.futures.Executor`: a `ProcessPoolExecutor`, a Dask client's `get_executor()`, or None
to run serially in this process), records failed runs without stopping, and writes the results
table in the grid's order. One sweep writes a directory at a time (a lock file); a new sweep
removes the half-written temporary directories a killed one left. The runs' bytes do not depend
on the executor: every run is the same pure computation, wherever it executes.

Runs whose agents wait on the network (model agents) may take a `NetworkLane` instead: its
executor runs them concurrently in this process (threads, or sessions on an event loop), at
most `window` at once, built by the lane's agent factory (the sweep's call policy: limiter, call
slots, spending caps, reply cache). Its runs are handed over one at a time as others finish, so
once `stopped()` gives a reason (the sweep's spending cap is reached) no further run starts:
those are listed as `not_started` with the reason and retried by the next sweep, as are runs
the sweep's cap cut (`capped`). If the sweep is interrupted (Ctrl-C), runs not started are
dropped, the lane's `cancel()` makes every later model call fail at once, and the runs in
flight are waited for before the interrupt goes on, so no session, thread or socket outlives
the sweep.
"""

from __future__ import annotations

import errno
import fcntl
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.report.source import data_path, data_sha256, file_sha256
from kestrel.sweep.results import clear_failure, finished, normalized, record_failure, write_tables
from kestrel.sweep.spec import SweepRun, SweepError, agent_file, run_key
from kestrel.sweep.universe import is_universe_name, universe_sha256
from kestrel.sweep.worker import (
    AgentFactory,
    DataLoader,
    RunAgents,
    RunTask,
    SessionRunner,
    cached_data,
    execute,
    row_base,
)

Progress = Callable[[dict[str, Any], int, int], None]


def _never() -> str | None:
    return None


def _nothing() -> None:
    return None


@dataclass
class NetworkLane:
    """Where the runs `takes` accepts go (see the module docstring)."""

    executor: Executor
    agents: RunAgents | AgentFactory
    takes: Callable[[SweepRun], bool]
    window: int = 8
    runner: SessionRunner | None = None
    stopped: Callable[[], str | None] = _never
    cancel: Callable[[], None] = _nothing


@dataclass
class SweepOutcome:
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    capped: int = 0  # runs the sweep's spending cap cut (kept under failed/, retried by the next sweep)
    not_started: list[str] = field(default_factory=list)  # keys of runs never started (the cap was reached)
    stop_reason: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)  # every run of the grid, in its order, COLUMNS
    tables: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The `--json` document: counts and one entry per run."""
        return {"ran": self.ran, "skipped": self.skipped, "failed": self.failed, "capped": self.capped,
                "not_started": len(self.not_started), "stop_reason": self.stop_reason, "runs": self.rows}


def plan_tasks(specs: Sequence[SweepRun], out: Path, data_loader: DataLoader) -> list[RunTask]:
    """Key every run (the data file's SHA-256, the sample's over its ticks; the agent file's)."""
    tasks: list[RunTask] = []
    shas: dict[str, str] = {}
    for s in specs:
        if s.data not in shas:
            path = data_path(s.data)
            if is_universe_name(s.data):
                shas[s.data] = universe_sha256(s.data)
            else:
                shas[s.data] = file_sha256(path) if path is not None else data_sha256(
                    s.data, cached_data(s.data, data_loader))
        af = agent_file(s.agent)
        news = file_sha256(s.news) if s.news is not None else None
        tasks.append(RunTask(s, run_key(s, shas[s.data], file_sha256(af) if af else None, news), str(out),
                             shas[s.data], news))
    return tasks


_HELD: set[str] = set()  # sweep directories this process holds (POSIX locks do not exclude it)
_HELD_LOCK = threading.Lock()


@contextmanager
def owned(out: Path) -> Iterator[None]:
    """Hold `out/.lock` and remove what a killed sweep left half-written.

    The lock is a POSIX record lock (`lockf`): it belongs to this process alone, so the pool
    workers it forks do not hold it, and the kernel drops it when this process dies, even on
    SIGKILL: a resume right after `kill -9` finds the directory free. A second sweep on the same
    directory in this process is refused by `_HELD` before the file is opened (closing any
    descriptor of the file would drop this process's lock)."""
    out.mkdir(parents=True, exist_ok=True)
    name = str(out.resolve())
    busy = SweepError(f"another sweep is writing {out}; wait for it or use another --out")
    with _HELD_LOCK:
        if name in _HELD:
            raise busy
        _HELD.add(name)
    try:
        with open(out / ".lock", "a+b") as lock:
            try:
                fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    raise busy from None
                raise
            for folder in ("runs", "failed"):
                if (out / folder).is_dir():
                    for stale in (out / folder).glob(".tmp-*"):
                        shutil.rmtree(stale, ignore_errors=True)
            yield
    finally:
        with _HELD_LOCK:
            _HELD.discard(name)


def run_sweep(specs: Sequence[SweepRun], out: Path, *, agent_factory: AgentFactory | RunAgents,
              data_loader: DataLoader, executor: Executor | None = None, progress: Progress | None = None,
              network: NetworkLane | None = None) -> SweepOutcome:
    """Run the grid's missing runs (see the module docstring)."""
    with owned(out):
        return _run(specs, out, agent_factory, data_loader, executor, progress, network)


def _run(specs: Sequence[SweepRun], out: Path, agent_factory: AgentFactory | RunAgents, data_loader: DataLoader,
         executor: Executor | None, progress: Progress | None, network: NetworkLane | None) -> SweepOutcome:
    tasks = plan_tasks(specs, out, data_loader)
    result = SweepOutcome()
    rows: dict[str, dict[str, Any]] = {}
    local: deque[RunTask] = deque()
    remote: deque[RunTask] = deque()
    seen: set[str] = set()
    for t in tasks:
        if t.key in seen:
            continue
        seen.add(t.key)
        stored = finished(out, t.key)
        if stored is not None:
            rows[t.key] = stored
            result.skipped += 1
        elif network is not None and network.takes(t.spec):
            remote.append(t)
        else:
            local.append(t)
    total = len(local) + len(remote)

    def done(row: dict[str, Any]) -> None:
        rows[row["key"]] = row
        if row.get("error") and row.get("spending_cap") == "sweep" and not row.get("failure"):
            result.capped += 1
            record_failure(out, row)
        elif row.get("error"):
            result.failed += 1
            record_failure(out, row)
        else:
            result.ran += 1
            clear_failure(out, row["key"])
        if progress is not None:
            progress(row, result.ran + result.failed + result.capped, total)

    def lost(task: RunTask, exc: BaseException) -> dict[str, Any]:  # the worker itself died
        row = row_base(task)
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        row["failure"] = "error"
        return row

    flight: dict[Future[dict[str, Any]], RunTask] = {}
    lane: set[Future[dict[str, Any]]] = set()
    if executor is not None:
        flight.update({executor.submit(execute, t, agent_factory, data_loader): t for t in local})
        local.clear()

    def hand_over() -> None:
        """Start the lane's next runs up to its window, unless it was stopped."""
        if network is None:
            return
        while remote and len(lane) < network.window:
            reason = network.stopped()
            if reason is not None:
                result.stop_reason = reason
                result.not_started = [t.key for t in remote]
                remote.clear()
                return
            t = remote.popleft()
            f = network.executor.submit(execute, t, network.agents, data_loader, network.runner)
            flight[f] = t
            lane.add(f)

    def collect(f: Future[dict[str, Any]]) -> None:
        t = flight.pop(f)
        lane.discard(f)
        exc = f.exception()
        done(f.result() if exc is None else lost(t, exc))

    try:
        hand_over()
        while flight or local or remote:
            if local:  # serial: one run in line at a time, the lane's runs meanwhile on their own
                done(execute(local.popleft(), agent_factory, data_loader))
                for f in [f for f in flight if f.done()]:
                    collect(f)
            elif flight:
                ready, _ = wait(list(flight), return_when=FIRST_COMPLETED)
                for f in ready:
                    collect(f)
            hand_over()
    except BaseException:  # interrupted: start nothing more, end the lane's calls, wait for its runs
        for f in flight:
            f.cancel()
        if network is not None:
            network.cancel()
        wait([f for f in flight if not f.cancelled()])
        raise
    result.rows = [normalized(rows[k]) for k in dict.fromkeys(t.key for t in tasks) if k in rows]
    result.tables = write_tables(out, result.rows)
    return result


__all__ = ["NetworkLane", "Progress", "SweepOutcome", "plan_tasks", "run_sweep"]
