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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import msgspec

from kestrel.cli.agentspec import agent_of, check_agent_fits
from kestrel.cli.errors import UsageError
from kestrel.cli.textreport import report, summary

DIRECT = "direct"
EFFORT_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")  # = profiles.EFFORT_LEVELS (tested)
DEFAULT_AGENT_TIMEOUT_S = 120.0  # = actors.driver.DEFAULT_AGENT_TIMEOUT_S (tested)


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
    s.add_argument("--date", help="session date YYYY-MM-DD (default: the data's last complete session)")
    s.add_argument("--days", type=int, default=1, help="number of sessions ending at --date (default 1)")
    s.add_argument("--checkpoints", default="", help="authoring checkpoints after OPEN, e.g. 11:00,13:30")
    s.add_argument("--guard", type=int, default=300, help="snapshot guard before each ordinal, seconds (default 300)")
    s.add_argument("--agent", help="baseline (default) | fixed:PLAN.kes | recorded:CAPTURE.jsonl | "
                                   "replies:FILE | openai:MODEL | anthropic:MODEL")
    s.add_argument("--profile", help="execution profile: balanced | fast | thorough")
    s.add_argument("--mode", help="mode from the modes config (what runs: agent, model, panes)")
    s.add_argument("--modes", metavar="PATH", help="a TOML file of [modes.NAME] tables merged over the built-in modes")
    s.add_argument("--max-iterations", type=int, help="view_request_cap: non-terminal iterations (default 3)")
    s.add_argument("--token-budget", type=int, help="authoring_token_budget per ordinal (default 8000)")
    s.add_argument("--effort", choices=EFFORT_LEVELS,
                   help="reasoning effort for model agents, gated per model (kestrel/models/capabilities.toml)")
    s.add_argument("--self-correct", action="store_true", help="dry-run valid plans and allow one correction")
    s.add_argument("--model", help="model for openai/anthropic agents (or write --agent openai:MODEL)")
    s.add_argument("--base-url", help="model endpoint handed to the SDK unchanged, e.g. http://127.0.0.1:8000/v1")
    s.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)")
    s.add_argument("--agent-timeout", type=float, default=DEFAULT_AGENT_TIMEOUT_S,
                   help=f"seconds per agent call, handed to the model SDK too (default {DEFAULT_AGENT_TIMEOUT_S:g})")
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
    p.add_argument("--report", help="also write the run's self-contained HTML report to PATH.html")
    p.add_argument("--png", help="also write a PNG chart of the run (needs `pip install 'kestrel[plot]'`)")


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
    from kestrel.session.spec import SpecError, load_named

    try:
        return load_named(name)
    except SpecError as exc:
        raise UsageError(str(exc)) from None


# ------------------------------------------------------------------------------------------
# simulate


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
    for flag, path in (("--capture", args.capture), ("--ledger", args.ledger), ("--evidence", args.evidence),
                       ("--report", args.report), ("--png", args.png)):
        _check_writable(flag, path)
    if args.seed is not None and args.data != "sample":
        raise UsageError("--seed applies to --data sample only")
    if args.data == "sample" and (args.preset is not None or args.crossed != "error"):
        raise UsageError("--preset and --crossed apply to --data PATH only (the sample is clean)")
    if not 0 < args.agent_timeout <= 3600:
        raise UsageError(f"--agent-timeout must be > 0 and <= 3600 seconds, got {args.agent_timeout:g}")
    try:
        profile = profiles.lookup(args.profile) if args.profile is not None else None
        modes = _modes(args.modes)
        mode = profiles.lookup_mode(args.mode, modes) if args.mode is not None else None
    except profiles.ProfileError as exc:
        raise UsageError(str(exc)) from None
    flags = profiles.Flags(
        view_request_cap=args.max_iterations,
        authoring_token_budget=args.token_budget,
        effort=args.effort,
        self_correct=args.self_correct,
        agent=args.agent,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
    )
    resolved = profiles.resolve(flags, mode, profile)
    st = resolved.settings
    spec = st.agent or "baseline"
    model = st.model
    if args.agent is not None and args.agent.partition(":")[2].strip() and args.model is None:
        model = None  # an explicit --agent PROVIDER:MODEL wins over a mode's model
    agent = agent_of(spec, model=model, base_url=st.base_url, api_key_env=st.api_key_env,
                     timeout_s=args.agent_timeout)
    _note_unused_loop_flags(args, agent, spec)
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
    check_agent_fits(agent, data, options, date, args.days, st.agent or "baseline")
    _warn_partial(data, date, args.days)
    with _evidence_sink(args.evidence) as sink:
        result = _run(data, agent, options, args.backend, date, args.days, sink, args.json,
                      args.agent_timeout)
    return _finish(args, result, data)


def _warn_partial(data: Any, date: dt.date | None, days: int) -> None:
    """One stderr line when the run includes a session the data does not span (a file that
    starts or stops mid-session): its results cover only part of the session."""
    from kestrel.session.coverage import coverage
    from kestrel.session.runner import pick_sessions

    partial = [c for c in (coverage(data, s) for s in pick_sessions(data, date, days)) if not c.complete]
    if partial:
        print(f"kestrel simulate: warning: {'; '.join(c.describe() for c in partial)}", file=sys.stderr)


def _modes(path: str | None) -> Any:
    """The built-in modes, with the user's `--modes` file merged over them (all validated)."""
    from kestrel.frame import DEFAULT_CATALOG
    from kestrel.session import profiles

    panes = DEFAULT_CATALOG.names()
    if path is None:
        return profiles.load_modes(panes=panes)
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise UsageError(f"--modes {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--modes {path}: not UTF-8 text (byte {exc.start})") from None
    return profiles.load_modes(over=text, source=f"--modes {path}", panes=panes)


def _note_unused_loop_flags(args: argparse.Namespace, agent: Any, name: str) -> None:
    """Loop knobs do nothing for a single-shot agent: say so on stderr (never on stdout, and
    never in the ledger or capture, so a flagged run stays byte-identical to an unflagged one)."""
    model_flags = [
        flag
        for flag, value in (("--model", args.model), ("--base-url", args.base_url),
                            ("--api-key-env", args.api_key_env))
        if value is not None
    ]
    if model_flags and name.partition(":")[0].strip().lower() not in ("openai", "anthropic"):
        print(
            f"kestrel simulate: note: agent {name!r} calls no model, so {', '.join(model_flags)} "
            f"{'has' if len(model_flags) == 1 else 'have'} no effect on this run",
            file=sys.stderr,
        )
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
         sink: Callable[[Any], None] | None, quiet: bool,
         agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S) -> Any:
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
            return run_session(data, agent, options, date=date, days=days, sink=sink, progress=tick,
                               agent_timeout=agent_timeout)
        from actors.driver import run_simulation

        return run_simulation(data, agent, options, backend=backend, date=date, days=days, sink=sink,
                              progress=tick, agent_timeout=agent_timeout)


def _finish(args: argparse.Namespace, result: Any, data: Any) -> int:
    _write(args.capture, result.capture_jsonl())
    _write(args.ledger, result.ledger_jsonl())
    if args.report or args.png:
        from kestrel.cli.report import write_run_report
        from kestrel.report import from_result
        from kestrel.report.source import header_sha256

        write_run_report(from_result(result, data, data_sha256=header_sha256(result.header, data)),
                         args.report, args.png)
    if args.json:
        sys.stdout.write(msgspec.json.encode(summary(result, data)).decode() + "\n")
    else:
        report(result, data)
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
    for flag, path in (("--capture", args.capture), ("--ledger", args.ledger), ("--report", args.report),
                       ("--png", args.png)):
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
    code = _finish(args, result, data)
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

__all__ = ["load_data", "register", "report", "summary"]
