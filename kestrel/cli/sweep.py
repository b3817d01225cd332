"""`kestrel sweep`: agents x profiles x data x days, on a process pool or a Dask cluster.

The composition root for `kestrel.sweep`: it validates the grid up front (agents, profiles,
data, dates), picks the executor (serial for `--jobs 1`, a `ProcessPoolExecutor` for `--jobs N`,
a Dask client's executor for `--scheduler`), shows a progress bar on a terminal and prints the
leaderboard or, with `--json`, one JSON document.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from kestrel.cli.errors import UsageError
from kestrel.cli.subcommands import Subcommands
from kestrel.providers import names


def register(subparsers: Subcommands) -> None:
    s = subparsers.add_parser(
        "sweep",
        help="run agents x profiles x data files x days; resumable; local processes or Dask",
        description=(
            "Run every agent x profile x data file x session (or --days-per-run sessions) as one run, "
            "keyed by a hash of its spec and the data file's SHA-256. Writes DIR/runs/KEY/"
            "{capture,ledger,evidence}.jsonl atomically and DIR/results.csv (and .parquet); a rerun "
            "skips finished keys; a failing run is recorded and the sweep goes on. A grid file "
            "(TOML) may give the same fields: agents, profiles, data, date, days, days_per_run, "
            "checkpoints, guard_s, out, jobs, scheduler."
        ),
    )
    s.add_argument("grid", nargs="?", help="a TOML grid file (instead of --agents/--profiles/--data)")
    s.add_argument("--agents", help="comma-separated agents: baseline, fixed:PLAN.kes, recorded:CAPTURE.jsonl, "
                                    "replies:FILE, PROVIDER:MODEL (providers: " + ", ".join(names()) + "; keys from the environment)")
    s.add_argument("--profiles", help="comma-separated execution profiles (default balanced)")
    s.add_argument("--data", help="comma-separated data files (or sample, sample|seed=N; default sample); loading "
                                  "options follow a file after |, e.g. 'PATH|crossed=drop' (drop crossed quotes; "
                                  "or keep), 'PATH|preset=NAME', 'PATH|symbol=SYM'")
    s.add_argument("--date", help="last session date YYYY-MM-DD (default: each file's last complete session)")
    s.add_argument("--days", type=int, help="sessions ending at --date (default 1); each is one run")
    s.add_argument("--days-per-run", type=int, help="sessions per run (default 1; must divide --days)")
    s.add_argument("--checkpoints", help="authoring checkpoints after OPEN, e.g. 11:00,13:30")
    s.add_argument("--guard", type=int, help="snapshot guard before each ordinal, seconds (default 300)")
    s.add_argument("--out", help="the sweep directory (required unless the grid file names it)")
    s.add_argument("--news", help="a news file (JSON lines, CSV, Parquet) for every run's news pane")
    s.add_argument("--blind", action="store_true", default=None,
                   help="blind mode for every run: aliases, session numbers, rescaled prices, masked news")
    where = s.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, help="local worker processes (default: the CPU count; 1 = serial)")
    where.add_argument("--scheduler", help="a Dask scheduler address, tcp://HOST:PORT (needs kestrel[dask])")
    s.add_argument("--json", action="store_true", help="print one JSON document: ran, skipped, failed, runs")
    s.add_argument("--report", help="also write the leaderboard HTML to PATH.html")
    s.set_defaults(func=_sweep)


def _csv(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _grid(args: argparse.Namespace) -> tuple[Any, str, int | None, str | None]:
    """(Grid, out, jobs, scheduler) from the grid file and the flags (flags win)."""
    from kestrel.sweep.spec import Grid, SweepError, load_grid_file

    fields: dict[str, Any] = {}
    out = jobs = scheduler = None
    try:
        if args.grid is not None:
            gf = load_grid_file(args.grid)
            fields = {f: getattr(gf, f) for f in Grid.__struct_fields__}
            out, jobs, scheduler = gf.out, gf.jobs, gf.scheduler
        for flag, field in (("agents", "agents"), ("profiles", "profiles"), ("data", "data"),
                            ("checkpoints", "checkpoints")):
            v = _csv(getattr(args, flag))
            if v is not None:
                fields[field] = v
        for flag, field in (("date", "date"), ("days", "days"), ("days_per_run", "days_per_run"),
                            ("guard", "guard_s"), ("news", "news"), ("blind", "blind")):
            if getattr(args, flag) is not None:
                fields[field] = getattr(args, flag)
        if "agents" not in fields:
            raise UsageError("name the agents: --agents A,B (or a grid file)")
        grid = Grid(**fields).check()
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    out = args.out or out
    if not out:
        raise UsageError("name the sweep directory: --out DIR (or `out` in the grid file)")
    if args.jobs is not None or args.scheduler is not None:
        jobs, scheduler = args.jobs, args.scheduler
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {jobs}")
    if grid.date is not None:
        import datetime as dt

        try:
            dt.date.fromisoformat(grid.date)
        except ValueError:
            raise UsageError(f"--date must be YYYY-MM-DD, got {grid.date!r}") from None
    if not 0 <= grid.guard_s < 86400:
        raise UsageError(f"--guard must be 0 to 86399 seconds, got {grid.guard_s}")
    if grid.news is not None:  # checked once here, named by its absolute path in every run
        import os

        import msgspec

        from kestrel.data import DataError
        from kestrel.data.news import load_news

        try:
            load_news(grid.news)
        except DataError as exc:
            raise UsageError(str(exc)) from None
        grid = msgspec.structs.replace(grid, news=os.path.abspath(grid.news))
    return grid, str(out), jobs, scheduler


def _sweep(args: argparse.Namespace) -> int:
    from kestrel.cli.errors import guarded

    return guarded("sweep", lambda: _run_sweep(args))


def _run_sweep(args: argparse.Namespace) -> int:
    from kestrel.cli.agentspec import agent_of
    from kestrel.cli.datanames import load_named as load_data
    from kestrel.session import profiles
    from kestrel.session.coverage import default_session_index
    from kestrel.session.schedule import ordinals
    from kestrel.sweep.run import run_sweep
    from kestrel.sweep.spec import SweepError, expand
    from kestrel.sweep.worker import cached_data

    grid, out, jobs, scheduler = _grid(args)
    grid = msgspec.structs.replace(grid, agents=tuple(_absolute_agent(a) for a in grid.agents),
                                   data=tuple(_absolute_data(d) for d in grid.data))
    for a in grid.agents:
        try:
            agent_of(a)  # a bad agent or plan file fails here, before anything runs
        except UsageError as exc:
            raise UsageError(sweep_words(str(exc))) from None
    for p in grid.profiles:
        try:
            profiles.lookup(p)
        except profiles.ProfileError as exc:
            raise UsageError(str(exc)) from None

    def sessions_of(name: str) -> list[str]:
        """The data's sessions; without --date up to the last complete one (as `simulate`)."""
        try:
            data = cached_data(name, load_data)
        except UsageError as exc:
            raise UsageError(sweep_words(str(exc), data=name)) from None
        if not data.sessions:
            return []
        ordinals(data.sessions[-1], grid.checkpoints)  # a bad checkpoint fails up front
        end = len(data.sessions) if grid.date is not None else default_session_index(data) + 1
        return [s.date.isoformat() for s in data.sessions[:end]]

    try:
        specs = expand(grid, sessions_of)
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    outdir = Path(out)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    with _executor(jobs, scheduler) as executor, _progress(not args.json, len(specs)) as progress:
        try:
            outcome = run_sweep(specs, outdir, agent_factory=agent_of, data_loader=load_data, executor=executor,
                                progress=progress)
        except SweepError as exc:
            raise UsageError(str(exc)) from None
    if args.report:
        from kestrel.cli.report import write_text
        from kestrel.report.board import render_leaderboard

        write_text(args.report, render_leaderboard(outcome.rows, title=f"Kestrel sweep {outdir.name}"))
    if args.json:
        sys.stdout.write(msgspec.json.encode(outcome.summary()).decode() + "\n")
    else:
        from kestrel.cli.report import print_leaderboard

        print(f"ran {outcome.ran}, skipped {outcome.skipped} (finished before), failed {outcome.failed}; "
              f"results: {', '.join(outcome.tables)}")
        for r in outcome.rows:
            if r.get("error"):
                print(f"failed {r['key']} ({r['agent']}, {r['profile']}, {r['data']}, {r['dates']}): {r['error']}")
        print_leaderboard(outcome.rows)
    return 1 if outcome.failed else 0


def sweep_words(message: str, data: str | None = None) -> str:
    """A message written for `kestrel simulate`'s flags, told in `kestrel sweep`'s: the sweep has
    no --api-key-env, --model or --crossed; keys come from the environment and loading options
    follow the data path (`--data 'PATH|crossed=drop'`)."""
    head = (data or "PATH").partition("|")[0]
    for old, new in (
        (" (or name another variable with --api-key-env NAME, or --api-key-env none for a server that "
         "needs no key)",
         " (kestrel sweep and its workers, Dask ones included, read it from their environment)"),
        (" or pass --model MODEL", ""),
        ("--agent ", "--agents "),
        ("pass crossed='drop' or 'keep' (CLI --crossed drop|keep)",
         f"to drop or keep them, give the file as --data '{head}|crossed=drop' (or '|crossed=keep')"),
    ):
        message = message.replace(old, new)
    return message


def _absolute_agent(spec: str) -> str:
    """Agent files (`fixed:`, `recorded:`, `replies:`) as absolute paths, so workers started
    anywhere read them."""
    kind, sep, arg = spec.partition(":")
    if kind.strip().lower() in ("fixed", "recorded", "replies") and arg:
        return f"{kind}{sep}{os.path.abspath(arg)}"
    return spec


def _absolute_data(name: str) -> str:
    head, sep, opts = name.partition("|")
    return name if head == "sample" else f"{os.path.abspath(head)}{sep}{opts}"


@contextmanager
def _executor(jobs: int | None, scheduler: str | None) -> Iterator[Executor | None]:
    if scheduler is not None:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--scheduler needs Dask: pip install 'kestrel[dask]'") from None
        try:
            client = Client(scheduler, timeout=10)
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
        try:
            yield client.get_executor()
        finally:
            client.close()
        return
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if n == 1:
        yield None
        return
    from kestrel.sweep.pool import local_pool

    with local_pool(n) as pool:  # workers die with this process, even on kill -9
        yield pool


@contextmanager
def _progress(show: bool, total: int) -> Iterator[Any]:
    if not (show and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("sweep", total=total)

        def tick(row: dict[str, Any], done: int, todo: int) -> None:
            bar.update(task, total=todo, completed=done)

        yield tick


__all__ = ["register"]
