"""Running a sweep: keys, resumption, an injected executor, the results table.

`run_sweep(specs, out, executor=...)` keys every run, skips the keys already finished under
`out/runs/` (a rerun after a crash or Ctrl-C resumes), hands the rest to `executor` (any
`concurrent.futures.Executor`: a `ProcessPoolExecutor`, a Dask client's `get_executor()`, or None
to run serially in this process), records failed runs without stopping, and writes the results
table in the grid's order. One sweep writes a directory at a time (a lock file); a new sweep
removes the half-written temporary directories a killed one left. The runs' bytes do not depend on the executor: every run is the same
pure computation, wherever it executes.
"""

from __future__ import annotations

import errno
import fcntl
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.report.source import data_path, data_sha256, file_sha256
from kestrel.sweep.results import clear_failure, finished, normalized, record_failure, write_tables
from kestrel.sweep.spec import SweepRun, SweepError, agent_file, run_key
from kestrel.sweep.worker import AgentFactory, DataLoader, RunTask, cached_data, execute, row_base

Progress = Callable[[dict[str, Any], int, int], None]


@dataclass
class SweepOutcome:
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)  # every run of the grid, in its order, COLUMNS
    tables: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The `--json` document: counts and one entry per run."""
        return {"ran": self.ran, "skipped": self.skipped, "failed": self.failed, "runs": self.rows}


def plan_tasks(specs: Sequence[SweepRun], out: Path, data_loader: DataLoader) -> list[RunTask]:
    """Key every run (the data file's SHA-256, the sample's over its ticks; the agent file's)."""
    tasks: list[RunTask] = []
    shas: dict[str, str] = {}
    for s in specs:
        if s.data not in shas:
            path = data_path(s.data)
            shas[s.data] = file_sha256(path) if path is not None else data_sha256(
                s.data, cached_data(s.data, data_loader))
        af = agent_file(s.agent)
        news = file_sha256(s.news) if s.news is not None else None
        tasks.append(RunTask(s, run_key(s, shas[s.data], file_sha256(af) if af else None, news), str(out),
                             shas[s.data]))
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
            runs = out / "runs"
            if runs.is_dir():
                for stale in runs.glob(".tmp-*"):
                    shutil.rmtree(stale, ignore_errors=True)
            yield
    finally:
        with _HELD_LOCK:
            _HELD.discard(name)


def run_sweep(specs: Sequence[SweepRun], out: Path, *, agent_factory: AgentFactory, data_loader: DataLoader,
              executor: Executor | None = None, progress: Progress | None = None) -> SweepOutcome:
    """Run the grid's missing runs (see the module docstring)."""
    with owned(out):
        return _run(specs, out, agent_factory, data_loader, executor, progress)


def _run(specs: Sequence[SweepRun], out: Path, agent_factory: AgentFactory, data_loader: DataLoader,
         executor: Executor | None, progress: Progress | None) -> SweepOutcome:
    tasks = plan_tasks(specs, out, data_loader)
    result = SweepOutcome()
    rows: dict[str, dict[str, Any]] = {}
    todo: list[RunTask] = []
    seen: set[str] = set()
    for t in tasks:
        if t.key in seen:
            continue
        seen.add(t.key)
        stored = finished(out, t.key)
        if stored is not None:
            rows[t.key] = stored
            result.skipped += 1
        else:
            todo.append(t)
    total = len(todo)

    def done(row: dict[str, Any]) -> None:
        rows[row["key"]] = row
        if row.get("error"):
            result.failed += 1
            record_failure(out, row)
        else:
            result.ran += 1
            clear_failure(out, row["key"])
        if progress is not None:
            progress(row, result.ran + result.failed, total)

    if executor is None:
        for t in todo:
            done(execute(t, agent_factory, data_loader))
    else:
        futures: dict[Future[dict[str, Any]], RunTask] = {
            executor.submit(execute, t, agent_factory, data_loader): t for t in todo}
        for fut in as_completed(futures):
            exc = fut.exception()
            if exc is None:
                done(fut.result())
            else:  # the worker itself died (killed process, lost Dask worker)
                row = row_base(futures[fut])
                row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
                done(row)
    result.rows = [normalized(rows[k]) for k in dict.fromkeys(t.key for t in tasks)]
    result.tables = write_tables(out, result.rows)
    return result


__all__ = ["Progress", "SweepOutcome", "plan_tasks", "run_sweep"]
