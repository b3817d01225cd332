"""`kestrel simulate` (a session on actors, with a readable report) and `kestrel replay`.

The CLI only parses flags and calls the library: `kestrel.session` resolves the posture and
runs the core, `actors.driver` runs it on an actor system (asyncio or trio). Outputs never
mention the backend, the profile or the run's time, so equivalent runs print the same bytes;
the profile name is recorded in the evidence trace only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgspec

DIRECT = "direct"


class UsageError(Exception):
    """A bad flag or input: exit code 2 with this one-line message."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = subparsers.add_parser(
        "simulate",
        help="simulate a trading session: an agent authors plans, the engine fires them",
        description=(
            "Run one or more simulated sessions on actors: at each authoring ordinal (OPEN, then "
            "optional checkpoints) the agent authors a turn in the bounded authoring loop under "
            "a frozen snapshot; the engine fires the armed plan at the tick. Prints a report."
        ),
    )
    _data_flags(s)
    s.add_argument("--date", help="session date YYYY-MM-DD (default: the data's last session)")
    s.add_argument("--days", type=int, default=1, help="number of sessions ending at --date (default 1)")
    s.add_argument("--checkpoints", default="", help="authoring checkpoints after OPEN, e.g. 11:00,13:30")
    s.add_argument("--guard", type=int, default=300, help="snapshot guard before each ordinal, seconds (default 300)")
    s.add_argument("--agent", help="baseline (default) | fixed:PLAN.kes | recorded:CAPTURE.jsonl")
    s.add_argument("--profile", help="execution profile: balanced | fast | thorough")
    s.add_argument("--mode", help="mode from the modes config (what runs: agent, model, panes)")
    s.add_argument("--max-iterations", type=int, help="view_request_cap: non-terminal iterations (default 3)")
    s.add_argument("--token-budget", type=int, help="authoring_token_budget per ordinal (default 8000)")
    s.add_argument("--effort", choices=("low", "medium", "high"), help="reasoning effort for model agents")
    s.add_argument("--self-correct", action="store_true", help="dry-run valid plans and allow one correction")
    s.add_argument("--model", help="model name for model agents (recorded in evidence)")
    _output_flags(s)
    s.add_argument("--evidence", help="write the authoring-loop evidence as JSON lines to PATH")
    s.set_defaults(func=_simulate)

    r = subparsers.add_parser(
        "replay",
        help="replay a capture: reproduces the session's ledger byte for byte",
        description="Replay the captured terminal turns of a `kestrel simulate --capture` run.",
    )
    r.add_argument("capture", help="a capture file written by `kestrel simulate --capture`")
    _output_flags(r)
    r.add_argument("--expect-ledger", help="compare the replayed ledger with this file (exit 1 if different)")
    r.set_defaults(func=_replay)


def _data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="sample", help="'sample' (default, bundled) or a CSV/Parquet file")
    p.add_argument("--preset", help="loader preset for --data PATH (default: detected)")
    p.add_argument("--crossed", choices=("error", "drop", "keep"), default="error",
                   help="crossed quotes (ask < bid) in --data PATH: error (default), drop or keep")
    p.add_argument("--symbol", help="instrument symbol (for --data PATH; checked against the sample)")
    p.add_argument("--seed", type=int, help="with --data sample: generate the sample from this seed")


def _output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--capture", help="write the captured turns (replay input) to PATH")
    p.add_argument("--ledger", help="write the ledger (canonical JSON lines) to PATH")
    p.add_argument("--backend", choices=("asyncio", "trio", DIRECT), default="asyncio",
                   help="actor backend (default asyncio); `direct` runs without actors")
    p.add_argument("--engine-path", choices=("auto", "reference"), default="auto",
                   help="auto (default): the engine's vectorized fast path where it applies; "
                        "reference: always per tick (same ledger, slower)")
    p.add_argument("--json", action="store_true", help="print one machine-readable JSON summary")


# ------------------------------------------------------------------------------------------
# data


def _data_name(args: argparse.Namespace) -> str:
    if args.data == "sample":
        return "sample" if args.seed is None else f"sample|seed={args.seed}"
    parts = [args.data]
    if args.preset:
        parts.append(f"preset={args.preset}")
    if args.crossed != "error":
        parts.append(f"crossed={args.crossed}")
    if args.symbol:
        parts.append(f"symbol={args.symbol}")
    return "|".join(parts)


def load_data(name: str) -> Any:
    """Load the data named by a capture header's `data` field (see `_data_name`)."""
    from kestrel.data import DataError, generate, load, load_sample
    from kestrel.data.sample import SAMPLE_SPEC

    head, *opts = name.split("|")
    kv: dict[str, str] = {}
    for o in opts:
        k, _, v = o.partition("=")
        kv[k] = v
    try:
        if head == "sample":
            return load_sample() if "seed" not in kv else generate(SAMPLE_SPEC, int(kv["seed"]))
        loaded = load(head, kv.get("preset"), crossed=kv.get("crossed", "error"),  # type: ignore[arg-type]
                      symbol=kv.get("symbol"))
    except (DataError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return loaded.data


# ------------------------------------------------------------------------------------------
# simulate


def _agent(spec: str) -> Any:
    """The agent named by `--agent`; a plan file or capture is read and validated here, so a
    bad one fails the command up front (exit 2) with the error and its place."""
    from kestrel.agents.baseline import BaselineAgent
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent

    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "baseline" and not arg:
        return BaselineAgent()
    if kind in ("fixed", "recorded") and arg:
        try:
            return FixedAgent.from_file(arg) if kind == "fixed" else RecordedAgent.from_file(arg)
        except ValueError as exc:  # PlanFileError, CaptureError
            raise UsageError(str(exc)) from None
    raise UsageError(f"unknown --agent {spec!r}: use baseline, fixed:PLAN.kes or recorded:CAPTURE.jsonl")


def _check_agent_fits(agent: Any, data: Any, options: Any, date: dt.date | None, days: int, spec: str) -> None:
    """Fail up front when the agent cannot play this run: a fixed plan the engine would refuse
    (another instrument, ...), or a capture recorded for other sessions or another schedule."""
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.engine.engine import Engine
    from kestrel.session.runner import session_days

    plan = session_days(data, options, date, days)
    sessions = [d.session for d in plan]
    schedule = [o.label for o in plan[0].ordinals]
    source = spec.partition(":")[2]
    if isinstance(agent, FixedAgent):
        try:
            Engine(options.engine, sessions[0], data.symbol, data.tick_size).arm(agent.plan)
        except ValueError as exc:
            raise UsageError(f"{source}: the engine refuses plan {agent.plan.name!r}: {exc}") from None
    if isinstance(agent, RecordedAgent) and agent.header is not None:
        h = agent.header
        want = [(s.date.isoformat(), o) for s in sessions for o in schedule]
        if agent.slots() != want or h.symbol != data.symbol:
            raise UsageError(
                f"{source} holds turns for {h.symbol} on {', '.join(h.dates)} at "
                f"{' '.join(h.schedule)}, but this run is {data.symbol} on "
                f"{', '.join(s.date.isoformat() for s in sessions)} at {' '.join(schedule)}: "
                f"use `kestrel replay {source}` (it reads the session from the capture) or "
                "pass matching --data/--date/--days/--checkpoints"
            )


def _check_writable(flag: str, path: str | None) -> None:
    """An output path that cannot be written fails before the run, not after it."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file path")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")


def _date(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--date must be YYYY-MM-DD, got {text!r}") from None


def _simulate(args: argparse.Namespace) -> int:
    return _guarded("simulate", lambda: _run_simulate(args))


def _run_simulate(args: argparse.Namespace) -> int:
    from kestrel.session import profiles
    from kestrel.session.loop import LoopSettings
    from kestrel.session.runner import SessionOptions

    for flag, value in (("--max-iterations", args.max_iterations), ("--token-budget", args.token_budget)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if not 0 <= args.guard < 86400:
        raise UsageError(f"--guard must be 0 to 86399 seconds, got {args.guard}")
    for flag, path in (("--capture", args.capture), ("--ledger", args.ledger), ("--evidence", args.evidence)):
        _check_writable(flag, path)
    if args.seed is not None and args.data != "sample":
        raise UsageError("--seed applies to --data sample only")
    if args.data == "sample" and (args.preset is not None or args.crossed != "error"):
        raise UsageError("--preset and --crossed apply to --data PATH only (the sample is clean)")
    try:
        profile = profiles.lookup(args.profile) if args.profile is not None else None
        mode = profiles.lookup_mode(args.mode) if args.mode is not None else None
    except profiles.ProfileError as exc:
        raise UsageError(str(exc)) from None
    flags = profiles.Flags(
        view_request_cap=args.max_iterations,
        authoring_token_budget=args.token_budget,
        effort=args.effort,
        self_correct=args.self_correct,
        agent=args.agent,
        model=args.model,
    )
    resolved = profiles.resolve(flags, mode, profile)
    st = resolved.settings
    agent = _agent(st.agent or "baseline")
    _note_unused_loop_flags(args, agent, st.agent or "baseline")
    data = load_data(_data_name(args))
    if args.symbol and args.data == "sample" and args.symbol != data.symbol:
        raise UsageError(f"--symbol {args.symbol} does not match the sample's symbol {data.symbol}")
    options = SessionOptions(
        checkpoints=tuple(c for c in args.checkpoints.split(",") if c.strip()),
        guard_s=args.guard,
        settings=LoopSettings.of(st),
        policy=resolved.policy,
        profile=resolved.profile,
        allowed_panes=st.panes,
        data_name=_data_name(args),
        engine_path=args.engine_path,
    )
    date = _date(args.date)
    _check_agent_fits(agent, data, options, date, args.days, st.agent or "baseline")
    with _evidence_sink(args.evidence) as sink:
        result = _run(data, agent, options, args.backend, date, args.days, sink, args.json)
    return _finish(args, result, agent)


def _note_unused_loop_flags(args: argparse.Namespace, agent: Any, name: str) -> None:
    """Loop knobs do nothing for a single-shot agent: say so on stderr (never on stdout, and
    never in the ledger or capture, so a flagged run stays byte-identical to an unflagged one)."""
    if getattr(agent, "iterative", False):
        return
    given = [
        flag
        for flag, value in (
            ("--profile", args.profile),
            ("--max-iterations", args.max_iterations),
            ("--token-budget", args.token_budget),
            ("--effort", args.effort),
            ("--self-correct", args.self_correct or None),
        )
        if value is not None
    ]
    if given:
        print(
            f"kestrel simulate: note: agent {name!r} is single-shot and never enters the "
            f"authoring loop, so {', '.join(given)} {'has' if len(given) == 1 else 'have'} "
            "no effect on this run",
            file=sys.stderr,
        )


@contextmanager
def _evidence_sink(path: str | None) -> Iterator[Callable[[Any], None] | None]:
    if path is None:
        yield None
        return
    from kestrel.logs import open_json_sink
    from kestrel.session.runner import evidence_logger

    try:
        ctx = open_json_sink(path, append=False)
        with ctx as log:
            yield evidence_logger(log)
    except OSError as exc:
        raise UsageError(str(exc)) from None


def _run(data: Any, agent: Any, options: Any, backend: str, date: dt.date | None, days: int,
         sink: Callable[[Any], None] | None, quiet: bool) -> Any:
    from kestrel.session.runner import run_session

    progress_ctx: Any = nullcontext(None)
    if days > 1 and not quiet and sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress

        progress_ctx = Progress(console=Console(stderr=True), transient=True)
    with progress_ctx as bar:
        tick: Callable[[int, int], None] | None = None
        if bar is not None:
            task = bar.add_task("simulating sessions", total=days)

            def tick(k: int, n: int) -> None:
                bar.update(task, completed=k)

        if backend == DIRECT:
            return run_session(data, agent, options, date=date, days=days, sink=sink, progress=tick)
        from actors.driver import run_simulation

        return run_simulation(data, agent, options, backend=backend, date=date, days=days, sink=sink,
                              progress=tick)


def _finish(args: argparse.Namespace, result: Any, agent: Any) -> int:
    _write(args.capture, result.capture_jsonl())
    _write(args.ledger, result.ledger_jsonl())
    if args.json:
        sys.stdout.write(msgspec.json.encode(summary(result)).decode() + "\n")
    else:
        report(result)
    return 0


def _write(path: str | None, data: bytes) -> None:
    if path is None:
        return
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


# ------------------------------------------------------------------------------------------
# replay


def _replay(args: argparse.Namespace) -> int:
    return _guarded("replay", lambda: _run_replay(args))


def _run_replay(args: argparse.Namespace) -> int:
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.session.capture import CaptureError, read_capture
    from kestrel.session.runner import SessionOptions

    try:
        header, turns = read_capture(args.capture)
    except CaptureError as exc:
        raise UsageError(str(exc)) from None
    if not header.dates:
        raise UsageError(f"{args.capture}: the capture names no session date")
    data = load_data(header.data)
    for flag, path in (("--capture", args.capture), ("--ledger", args.ledger)):
        _check_writable(flag, path)
    agent = RecordedAgent(turns, agent_id=header.agent, header=header)
    options = SessionOptions(checkpoints=header.schedule[1:], guard_s=header.guard_s,
                             data_name=header.data, engine_path=args.engine_path)
    result = _run(data, agent, options, args.backend, dt.date.fromisoformat(header.dates[-1]),
                  len(header.dates), None, args.json)
    try:
        agent.assert_finished()
    except RuntimeError as exc:
        print(f"kestrel replay: {exc}", file=sys.stderr)
        return 1
    code = _finish(args, result, agent)
    if args.expect_ledger:
        try:
            expected = Path(args.expect_ledger).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.expect_ledger}: {exc.strerror}") from None
        if expected != result.ledger_jsonl():
            print("kestrel replay: the replayed ledger differs from --expect-ledger", file=sys.stderr)
            return 1
        print("kestrel replay: ledger identical to --expect-ledger", file=sys.stderr)
    return code


def _guarded(command: str, run: Callable[[], int]) -> int:
    from kestrel.logs import configure_console
    from kestrel.session.runner import SessionError
    from kestrel.session.schedule import ScheduleError

    configure_console(level="warning")
    try:
        return run()
    except (UsageError, SessionError, ScheduleError) as exc:
        print(f"kestrel {command}: {exc}", file=sys.stderr)
        return 2


# ------------------------------------------------------------------------------------------
# report


def _turn_kind(turn: Any) -> str:
    from kestrel.session.protocol import StandDownTurn, Supersede

    if isinstance(turn, Supersede):
        return f"PLAN {turn.plan.name}"
    if isinstance(turn, StandDownTurn):
        return "STANDDOWN"
    return "PASS"


def summary(result: Any) -> dict[str, Any]:
    """The machine-readable summary (`--json`): per day and in total."""
    days = []
    totals: Counter[str] = Counter()
    net = 0.0
    evidence: Counter[str] = Counter()
    ticks: Counter[str] = Counter(fast=0, reference=0)
    for d in result.days:
        s = d.summary
        days.append({
            "date": d.date,
            "turns": [
                {"ordinal": o.ordinal, "turn": _turn_kind(o.turn), "armed": o.armed,
                 "iterations": o.iterations, "tokens": o.tokens_spent, "escalations": o.escalations}
                for o in d.outcomes
            ],
            "trades": s.trades, "wins": s.wins, "realized_pnl": round(s.realized_pnl, 6),
            "fees": round(s.fees, 6), "net_pnl": round(s.net_pnl, 6),
            "max_drawdown": round(s.max_drawdown, 6), "orders": s.orders, "fills": s.fills,
            "engine_ticks": dict(sorted(d.engine_ticks.items())),
        })
        totals.update(trades=s.trades, wins=s.wins, orders=s.orders, fills=s.fills)
        ticks.update(d.engine_ticks)
        net += s.net_pnl
        evidence.update(e.kind for e in d.evidence)
    return {
        "data": result.header.data,
        "symbol": result.header.symbol,
        "agent": result.header.agent,
        "dates": list(result.header.dates),
        "schedule": list(result.header.schedule),
        "engine_path": result.engine_path,
        "engine_ticks": dict(sorted(ticks.items())),
        "days": days,
        "total": {**dict(sorted(totals.items())), "net_pnl": round(net, 6)},
        "evidence": dict(sorted(evidence.items())),
    }


def report(result: Any) -> None:
    """The readable report: turns per ordinal, armed plans, trades, PnL and evidence counts."""
    from rich.console import Console
    from rich.table import Table

    from kestrel import lang
    from kestrel.engine.ledger import Filled, PositionChanged
    from kestrel.session.protocol import StandDownTurn, Supersede

    con = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    h = result.header
    con.print(f"[bold]kestrel simulate[/bold]  {h.symbol}  data {h.data}  agent {h.agent}  "
              f"sessions {', '.join(h.dates)}  schedule {' '.join(h.schedule)}")
    turns = Table(title="Turns per ordinal", title_justify="left")
    for col in ("date", "ordinal", "turn", "armed", "iterations", "tokens"):
        turns.add_column(col, justify="right" if col in ("iterations", "tokens") else "left")
    plans: dict[str, str] = {}
    for d in result.days:
        for o in d.outcomes:
            kind = _turn_kind(o.turn)
            if isinstance(o.turn, StandDownTurn):
                kind += f": {o.turn.reason}"
            if isinstance(o.turn, Supersede):
                plans.setdefault(lang.format(o.turn.plan).rstrip("\n"), f"{d.date} {o.ordinal}")
            turns.add_row(d.date, o.ordinal, kind, o.armed, str(o.iterations), str(o.tokens_spent))
    con.print(turns)
    for text, where in plans.items():
        con.print(f"[bold]Armed plan[/bold] ({where}):")
        con.print(text, markup=False)
    trades = Table(title="Fills", title_justify="left")
    for col in ("date", "time", "side", "qty", "price", "position", "realized"):
        trades.add_column(col, justify="left" if col in ("date", "time", "side") else "right")
    for d in result.days:
        # the engine emits each fill's PositionChanged right after it (several fills may share
        # a tick), so a fill's position is the next event's
        events = d.ledger.events
        for k, e in enumerate(events):
            if not isinstance(e, Filled):
                continue
            nxt = events[k + 1] if k + 1 < len(events) else None
            p = nxt if isinstance(nxt, PositionChanged) else None
            clock = dt.datetime.fromtimestamp(e.ts // 10**9, ZoneInfo(d.tz)).strftime("%H:%M:%S")
            trades.add_row(d.date, clock, e.side, str(e.qty), f"{e.price:.{d.decimals}f}",
                           str(p.pos) if p else "", f"{p.rpnl:+.2f}" if p else "")
    if trades.row_count:
        con.print(trades)
    else:
        con.print("No fills.")
    pnl = Table(title="PnL", title_justify="left")
    for col in ("date", "trades", "wins", "realized", "fees", "net", "max drawdown", "orders", "fills"):
        pnl.add_column(col, justify="left" if col == "date" else "right")
    for d in result.days:
        s = d.summary
        pnl.add_row(d.date, str(s.trades), str(s.wins), f"{s.realized_pnl:+.2f}", f"{s.fees:.2f}",
                    f"{s.net_pnl:+.2f}", f"{s.max_drawdown:.2f}", str(s.orders), str(s.fills))
    con.print(pnl)
    ticks: Counter[str] = Counter()
    for d in result.days:
        ticks.update(d.engine_ticks)
    con.print(f"Engine ({result.engine_path}): fast path {ticks['fast']} ticks, "
              f"reference path {ticks['reference']} ticks")
    counts = Counter(e.kind for e in result.evidence)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none (single-shot or first-reply turns)"
    con.print(f"Evidence records: {shown}")


__all__ = ["load_data", "register", "report", "summary"]
