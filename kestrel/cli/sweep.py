"""`kestrel sweep`: agents x profiles x data x days x repeats, model runs concurrently in
this process, the others on a process pool or a Dask cluster.

The composition root for `kestrel.sweep`: it validates the grid up front (agents and their
keys, profiles, data, dates, the leakage check), picks the executors (model agents' runs on
the network lane: `--max-concurrency` sessions at once on `--backend direct|asyncio|trio`,
`kestrel.cli.sweeplanes`; the others serial for `--jobs 1`, a `ProcessPoolExecutor` for
`--jobs N`, a Dask client's executor for `--scheduler`), shows a progress bar on a terminal and
prints the leaderboard with its statistics or, with `--json`, one JSON document. The exit code
is 0 when every run finished, 1 when a run failed (unless `--allow-failures`) or the sweep's
spending cap left runs undone, 2 for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kestrel.cli.callflags import add_call_flags, concurrency_limits
from kestrel.cli.errors import UsageError
from kestrel.cli.subcommands import Subcommands
from kestrel.cli.sweeplanes import BACKENDS, DEFAULT_CONCURRENCY
from kestrel.providers import names


def register(subparsers: Subcommands) -> None:
    s = subparsers.add_parser(
        "sweep",
        help="run agents x profiles x data files x days; resumable; local processes or Dask",
        description=(
            "Run every agent x profile x data file x session (or --days-per-run sessions) x repeat as one "
            "run, keyed by a hash of its spec and the data file's SHA-256. Writes DIR/runs/KEY/"
            "{capture,ledger,evidence}.jsonl and sessions.json atomically and DIR/results.csv (and "
            ".parquet), DIR/cells.csv, comparisons.csv and sessions.csv; a rerun skips finished keys; a "
            "failing run is recorded and the sweep goes on. Model agents may carry their endpoint and "
            "options: 'openai:gpt-5-mini@http://127.0.0.1:8000/v1|key=LOCAL_KEY|effort=low'. A grid file "
            "(TOML) may give the same fields: agents (strings or tables), profiles, data, date, days, "
            "days_per_run, checkpoints, guard_s, repeats, seed, temperature, arm_latency, news, blind, out, jobs, "
            "scheduler, backend, max_concurrency, max_usd, max_tokens, run_max_usd, run_max_tokens, reply_cache, "
            "allow_failures, require_post_cutoff."
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
    s.add_argument("--repeats", type=int, help="runs per cell (default 1); repeat r has seed SEED + r, sent to "
                                                 "providers that take one")
    s.add_argument("--seed", type=int, help="the first repeat's seed (default 0 with --repeats)")
    s.add_argument("--arm-latency", metavar="measured|SECONDS",
                   help="a turn takes effect SECONDS after its ordinal, or after it by the ordinal's measured "
                        "model-call time (off by default; recorded in each run's capture, replay arms the same)")
    s.add_argument("--temperature", type=float, help="model agents' sampling temperature (0 to 2; an agent's "
                                                      "|temperature= wins)")
    s.add_argument("--backend", choices=("direct", "asyncio", "trio"),
                   help="how model runs' sessions run: direct (run_session on threads, default), or on the actor "
                        "shell on one asyncio or trio event loop")
    s.add_argument("--max-concurrency", action="append", metavar="N|PROVIDER=N",
                   help="N: model runs in flight at once (default 8); PROVIDER=N: calls in flight to each endpoint "
                        "of PROVIDER (an agent's |concurrency= wins); repeatable or comma-separated")
    s.add_argument("--agent-timeout", type=float, help="seconds per model call, its retries included (default 120)")
    add_call_flags(s, sweep=True)
    s.add_argument("--allow-failures", action="store_true", help="exit 0 even when runs failed (they rank nowhere)")
    s.add_argument("--usd-rate", action="append", metavar="CUR=RATE",
                   help="dollars per unit of CUR, for the net-of-model-cost column of PnL in CUR (e.g. EUR=1.08); "
                        "without it that column is refused for PnL not in USD")
    s.add_argument("--json", action="store_true", help="print one JSON document: counts, runs, the leaderboard")
    s.add_argument("--report", help="also write the leaderboard HTML to PATH.html")
    s.set_defaults(func=_sweep)


def _csv(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(x.strip() for x in text.split(",") if x.strip())


@dataclass
class SweepSettings:
    """How the sweep runs (flags over the grid file's fields)."""

    out: str
    jobs: int | None = None
    scheduler: str | None = None
    backend: str = "direct"
    window: int = DEFAULT_CONCURRENCY
    per_provider: dict[str, int] = field(default_factory=dict)
    agent_timeout: float = 120.0
    max_usd: float | None = None
    max_tokens: int | None = None
    run_max_usd: float | None = None
    run_max_tokens: int | None = None
    reply_cache: str | None = None
    allow_failures: bool = False
    require_post_cutoff: bool = False
    usd_rates: dict[str, float] = field(default_factory=dict)




def _grid(args: argparse.Namespace) -> tuple[Any, SweepSettings]:
    """(Grid, SweepSettings) from the grid file and the flags (flags win)."""
    from kestrel.sweep.spec import Grid, SweepError, load_grid_file

    fields: dict[str, Any] = {}
    file: Any = None
    try:
        if args.grid is not None:
            file = load_grid_file(args.grid)
            grid = file.grid
            fields = {f: getattr(grid, f) for f in Grid.__struct_fields__}
        for flag, name in (("agents", "agents"), ("profiles", "profiles"), ("data", "data"),
                           ("checkpoints", "checkpoints")):
            v = _csv(getattr(args, flag))
            if v is not None:
                fields[name] = v
        for flag, name in (("date", "date"), ("days", "days"), ("days_per_run", "days_per_run"),
                           ("guard", "guard_s"), ("repeats", "repeats"), ("seed", "seed"),
                           ("temperature", "temperature"), ("news", "news"), ("blind", "blind")):
            if getattr(args, flag) is not None:
                fields[name] = getattr(args, flag)
        if args.arm_latency is not None:
            from kestrel.cli.callflags import arm_latency

            fields["arm_latency"] = arm_latency(args.arm_latency)
        if "agents" not in fields:
            raise UsageError("name the agents: --agents A,B (or a grid file)")
        grid = Grid(**fields).check()
    except SweepError as exc:
        raise UsageError(str(exc)) from None

    def pick(flag: str, name: str | None = None) -> Any:
        v = getattr(args, flag, None)
        return v if v not in (None, False, []) else (getattr(file, name or flag) if file is not None else None)

    out = pick("out")
    if not out:
        raise UsageError("name the sweep directory: --out DIR (or `out` in the grid file)")
    st = SweepSettings(out=str(out))
    if args.jobs is not None or args.scheduler is not None:
        st.jobs, st.scheduler = args.jobs, args.scheduler
    elif file is not None:
        st.jobs, st.scheduler = file.jobs, file.scheduler
    if st.jobs is not None and st.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {st.jobs}")
    backend = pick("backend") or "direct"
    if backend not in BACKENDS:
        raise UsageError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    st.backend = backend
    window, st.per_provider = concurrency_limits(list(args.max_concurrency or []) or list(file.max_concurrency if file else ()))
    st.window = window or DEFAULT_CONCURRENCY
    st.agent_timeout = args.agent_timeout if args.agent_timeout is not None else 120.0
    if not 0 < st.agent_timeout <= 3600:
        raise UsageError(f"--agent-timeout must be > 0 and <= 3600 seconds, got {st.agent_timeout:g}")
    for name in ("max_usd", "max_tokens", "run_max_usd", "run_max_tokens", "reply_cache"):
        setattr(st, name, pick(name))
    for name, value in (("max_usd", st.max_usd), ("run_max_usd", st.run_max_usd)):
        if value is not None and not value > 0:
            raise UsageError(f"{name} must be > 0, got {value}")
    for name, value in (("max_tokens", st.max_tokens), ("run_max_tokens", st.run_max_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
    st.allow_failures = bool(pick("allow_failures"))
    st.require_post_cutoff = bool(pick("require_post_cutoff"))
    from kestrel.cli.callflags import parse_usd_rates

    st.usd_rates = parse_usd_rates(args.usd_rate or [])
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
    return grid, st


def _sweep(args: argparse.Namespace) -> int:
    from kestrel.cli.errors import guarded

    return guarded("sweep", lambda: _run_sweep(args))


def _model_specs(agents: Sequence[str]) -> dict[str, Any]:
    """identity -> full spec of every model agent (two specs of one identity must agree)."""
    from kestrel.cli.agentspec import model_spec
    from kestrel.models.spec import is_model_spec

    out: dict[str, Any] = {}
    for a in agents:
        if not is_model_spec(a):
            continue
        ms = model_spec(a)
        if ms.identity in out and out[ms.identity] != ms:
            raise UsageError(f"agents {out[ms.identity].format()!r} and {ms.format()!r} run the same model the same "
                             "way but with different call options (key, rpm, tpm, concurrency): give one")
        out[ms.identity] = ms
    return out


def _run_sweep(args: argparse.Namespace) -> int:
    from kestrel.cli.agentspec import agent_of
    from kestrel.cli.callflags import budget, check_post_cutoff, rate_flags, reply_cache
    from kestrel.cli.datanames import load_named as load_data
    from kestrel.cli.sweeplanes import SweepCalls, lane_executor
    from kestrel.models.spec import is_model_spec
    from kestrel.session import profiles
    from kestrel.session.coverage import default_session_index
    from kestrel.session.schedule import ordinals
    from kestrel.sweep.run import NetworkLane, run_sweep
    from kestrel.sweep.spec import SweepError, expand
    from kestrel.data import DataError
    from kestrel.sweep.universe import universe_dates
    from kestrel.sweep.worker import cached_data

    grid, st = _grid(args)
    grid = msgspec.structs.replace(grid, agents=tuple(_absolute_agent(a) for a in grid.agents),
                                   data=tuple(_absolute_data(d) for d in grid.data))
    specs_of = _model_specs(grid.agents)
    universes = _universe_sweep(grid.data, grid.agents)
    for a in grid.agents:
        if is_model_spec(a) or universes:
            continue  # a model agent: checked with the sweep's call policy below
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
        if universes:
            try:
                return universe_dates(name)
            except (DataError, OSError, ValueError) as exc:
                raise UsageError(f"{name}: {exc}") from None
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
    if st.require_post_cutoff:
        for r in specs:
            if r.agent in specs_of:
                check_post_cutoff(specs_of[r.agent].model, list(r.dates), r.data)
    outdir = Path(st.out)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"--out {st.out}: not a directory")
    calls = None
    if specs_of:
        calls = SweepCalls(specs_of, timeout_s=st.agent_timeout, per_provider=st.per_provider,
                           sweep=budget(st.max_usd, st.max_tokens, "sweep"), run_max_usd=st.run_max_usd,
                           run_max_tokens=st.run_max_tokens, cache=reply_cache(st.reply_cache),
                           rates=rate_flags(args))
        try:
            calls.check()
        except UsageError as exc:
            raise UsageError(sweep_words(str(exc))) from None
    try:
        with _executor(st.jobs, st.scheduler) as executor, _progress(not args.json, len(specs)) as progress:
            network = None
            lane_pool = None
            if calls is not None:
                lane_pool, runner = lane_executor(st.backend, st.window, st.agent_timeout)
                network = NetworkLane(lane_pool, calls, calls.takes, st.window, runner, calls.exhausted, calls.cancel)
            try:
                outcome = run_sweep(specs, outdir, agent_factory=agent_of, data_loader=load_data, executor=executor,
                                    progress=progress, network=network)
            except SweepError as exc:
                raise UsageError(str(exc)) from None
            finally:
                if lane_pool is not None:
                    lane_pool.shutdown(wait=True)
    finally:
        if calls is not None:
            calls.close(st.agent_timeout)
    return _finish(args, st, outdir, outcome)


def _finish(args: argparse.Namespace, st: SweepSettings, outdir: Path, outcome: Any) -> int:
    from kestrel.cli.report import print_board, sweep_board
    from kestrel.sweep.results import write_board_tables

    board, records = sweep_board(outdir, outcome.rows, usd_rates=st.usd_rates)
    outcome.tables += write_board_tables(outdir, board, records)
    if args.report:
        from kestrel.cli.report import write_text

        write_text(args.report, board.html(title=f"Kestrel sweep {outdir.name}"))
    if args.json:
        doc = outcome.summary()
        doc["leaderboard"] = board.json()
        sys.stdout.write(msgspec.json.encode(doc).decode() + "\n")
    else:
        print(f"ran {outcome.ran}, skipped {outcome.skipped} (finished before), failed {outcome.failed}"
              + (f", cut by the sweep's spending cap {outcome.capped}" if outcome.capped else "")
              + (f", not started {len(outcome.not_started)}" if outcome.not_started else "")
              + f"; results: {', '.join(outcome.tables)}")
        for r in outcome.rows:
            if r.get("error"):
                kind = "cut" if r.get("spending_cap") == "sweep" and not r.get("failure") else "failed"
                print(f"{kind} {r['key']} ({r['agent']}, {r['profile']}, {r['data']}, {r['dates']}): {r['error']}")
        if outcome.stop_reason:
            print(f"stopped scheduling: {outcome.stop_reason}; not started: {len(outcome.not_started)} runs "
                  f"({', '.join(outcome.not_started[:5])}{', ...' if len(outcome.not_started) > 5 else ''}); "
                  "rerun with a higher cap to finish them")
        print_board(board)
    incomplete = outcome.capped or outcome.not_started
    if outcome.failed and not st.allow_failures:
        return 1
    return 1 if incomplete else 0


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


def _universe_sweep(data: Sequence[str], agents: Sequence[str]) -> bool:
    """Whether the sweep's data are universes (each cell a portfolio session); refuses a grid
    that mixes universes with single-symbol files, and agents that cannot trade a universe."""
    from kestrel.models.spec import is_model_spec
    from kestrel.sweep.universe import is_universe_name

    kinds = {is_universe_name(d) for d in data}
    if kinds == {True, False}:
        raise UsageError("a sweep's --data are all universes or all single-symbol files: run them as two sweeps")
    if kinds != {True}:
        return False
    for a in agents:
        kind, _, arg = a.partition(":")
        if kind == "baseline":
            raise UsageError("a universe sweep's baselines (equal-weight buy-and-hold, cash) come from the data: "
                             "drop baseline from --agents")
        if kind == "fixed" and arg:
            if not os.path.isfile(arg):
                raise UsageError(f"cannot read the plan file {arg!r}: no such file")
        elif not is_model_spec(a):
            raise UsageError(f"agent {a!r} cannot trade a universe: give fixed:PLANS.kes (plans ON each symbol) or "
                             "a model agent (PROVIDER:MODEL)")
    return True


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
