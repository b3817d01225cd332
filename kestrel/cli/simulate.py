"""`kestrel simulate` (a session on actors, with a readable report) and `kestrel replay`.

The CLI only parses flags and calls the library: `kestrel.session` resolves the posture and
runs the core, `kestrel.service.actors.driver` runs it on an actor system (asyncio or trio). Outputs never
mention the backend, the profile or the run's time, so equivalent runs print the same bytes;
the profile name is recorded in the evidence trace only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.agentspec import agent_of, check_agent_fits
from kestrel.cli.replays import calls_evidence, first_difference, replay_session, show_blind, with_recorded_calls
from kestrel.cli.callflags import add_call_flags, apply_rate_flags, arm_latency, check_post_cutoff, rate_flags, run_policy
from kestrel.cli.dataflags import add_data_flags, agent_input, check_paths, load_from_args, news_from_args, parse_date, parse_guard
from kestrel.cli.errors import UsageError, guarded
from kestrel.cli.writes import evidence_sink, write_file
from kestrel.cli.universe import (
    add_universe_flags,
    is_portfolio_capture,
    is_universe,
    run_universe_command,
    run_universe_replay,
)
from kestrel.providers import lookup
from kestrel.providers import names as provider_names
from kestrel.cli.execution import add_flags as _execution_flags
from kestrel.cli.execution import engine_config
from kestrel.cli.subcommands import Subcommands
from kestrel.engine import ENGINE_PATHS
from kestrel.report.summary import report, summary

if TYPE_CHECKING:  # imported lazily at run time (start-up cost)
    from rich.progress import Progress

    from kestrel.market import MarketData
    from kestrel.data.source import DataSource
    from kestrel.report.evidence import Recorded
    from kestrel.session.capture import CapturedTurn, CaptureWriter
    from kestrel.session.options import EvidenceSink, SessionOptions
    from kestrel.session.profiles import Mode
    from kestrel.session.protocol import Agent
    from kestrel.session.results import SessionResult

DIRECT = "direct"
CONSTRAIN_CHOICES = ("auto", "off", "llguidance", "gbnf", "ebnf")  # = profiles.CONSTRAIN_CHOICES (tested)
EFFORT_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")  # = profiles.EFFORT_LEVELS (tested)
DEFAULT_AGENT_TIMEOUT_S = 120.0  # = kestrel.service.actors.driver.DEFAULT_AGENT_TIMEOUT_S (tested)


def register(subparsers: Subcommands) -> None:
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
    s.add_argument("--guard", default="300",
                   help="snapshot guard before each ordinal: seconds (300) or a duration (30s, 5m, 1h); default 300")
    s.add_argument("--arm-latency", metavar="measured|SECONDS",
                   help="a turn takes effect after its ordinal by the authoring time (measured: its model calls' "
                        "latency) or by SECONDS, the window running on under the incumbent; off by default (at the "
                        "ordinal)")
    s.add_argument("--agent", help="baseline (default) | fixed:PLAN.kes | recorded:CAPTURE.jsonl | "
                                   "replies:FILE | PROVIDER:MODEL, PROVIDER one of " + ", ".join(provider_names()))
    s.add_argument("--profile", help="execution profile: balanced | fast | thorough")
    s.add_argument("--mode", help="mode from the modes config (what runs: agent, model, panes)")
    s.add_argument("--modes", metavar="PATH", help="a TOML file of [modes.NAME] tables merged over the built-in modes")
    s.add_argument("--max-iterations", type=int, help="view_request_cap: non-terminal iterations (default 3)")
    s.add_argument("--token-budget", type=int, help="authoring_token_budget per ordinal (default 8000)")
    s.add_argument("--effort", choices=EFFORT_LEVELS,
                   help="reasoning effort for model agents, gated per model (kestrel/models/capabilities.toml)")
    s.add_argument("--self-correct", action="store_true", help="dry-run valid plans and allow one correction")
    s.add_argument("--model", help="model for a provider's agent (or write --agent PROVIDER:MODEL)")
    s.add_argument("--base-url", help="model endpoint handed to the SDK unchanged, e.g. http://127.0.0.1:8000/v1")
    s.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY; "
                        "none: the server needs no key, as a --base-url on this machine when the variable is unset)")
    s.add_argument("--constrain", choices=CONSTRAIN_CHOICES,
                   help="the reply grammar sent to a model: auto (default: where the provider takes one), "
                        "off, or a dialect (llguidance, gbnf, ebnf) the provider takes")
    s.add_argument("--reason-first", action=argparse.BooleanOptionalAction, default=None,
                   help="with a reply grammar, make each reply two calls: free reasoning, then the "
                        "constrained statement with it as context (default off: one call)")
    s.add_argument("--agent-timeout", type=float, default=DEFAULT_AGENT_TIMEOUT_S,
                   help=f"seconds per agent call, handed to the model SDK too (default {DEFAULT_AGENT_TIMEOUT_S:g})")
    _execution_flags(s)
    s.add_argument("--pace", default="max", metavar="max|realtime|N",
                   help="release ticks by the wall clock: realtime, N times real time, or max "
                        "(default: as fast as possible); the ledger is the same at every pace")
    _output_flags(s)
    s.add_argument("--evidence", help="write the authoring-loop evidence as JSON lines to PATH")
    add_call_flags(s)
    s.set_defaults(func=_simulate)

    r = subparsers.add_parser(
        "replay",
        help="replay a capture: reproduces the session's ledger byte for byte",
        description="Replay the captured terminal turns of a `kestrel simulate --capture` run.",
    )
    r.add_argument("capture", help="a capture file written by `kestrel simulate --capture`")
    r.add_argument("--data", help="the captured data file moved elsewhere: accepted when its SHA-256 matches")
    r.add_argument("--news", help="the captured news file moved elsewhere: accepted when its SHA-256 matches")
    _output_flags(r, capture_dest="capture_out")
    r.add_argument("--expect-ledger", help="compare the replayed ledger with this file (exit 1 if different, "
                                            "with the first differing line of each)")
    r.add_argument("--no-verify", action="store_true",
                   help="replay a capture that records no ledger checksum (an interrupted run): its "
                        "replayed ledger is then not verified (without it such a capture is refused)")
    r.add_argument("--evidence", dest="recorded_evidence", metavar="FILE",
                   help="the captured run's evidence (simulate --evidence, a sweep run's evidence.jsonl): its model "
                        "calls' tokens and dollars are shown (a replay makes none; without it they are unknown)")
    r.set_defaults(func=_replay)


def _data_flags(p: argparse.ArgumentParser) -> None:
    add_data_flags(p)
    add_universe_flags(p)


def _output_flags(p: argparse.ArgumentParser, capture_dest: str = "capture") -> None:
    p.add_argument("--capture", dest=capture_dest, help="write the captured turns (replay input) to PATH")
    p.add_argument("--ledger", help="write the ledger (canonical JSON lines) to PATH")
    p.add_argument("--backend", choices=("asyncio", "trio", DIRECT), default="asyncio",
                   help="actor backend (default asyncio); `direct` runs without actors")
    p.add_argument("--engine-path", choices=ENGINE_PATHS, default="auto",
                   help="auto (default): the engine's vectorized fast path where it applies; "
                        "reference: always per tick (same ledger, slower)")
    p.add_argument("--json", action="store_true", help="print one machine-readable JSON summary")
    p.add_argument("--report", help="also write the run's self-contained HTML report to PATH.html")
    p.add_argument("--png", help="also write a PNG chart of the run (needs `pip install 'kestrel[plot]'`)")


# ------------------------------------------------------------------------------------------
# simulate


def _simulate(args: argparse.Namespace) -> int:
    return guarded("simulate", lambda: _run_simulate(args))


@dataclass(frozen=True)
class Prepared:
    """A `kestrel simulate` command line checked and resolved, ready to run."""

    data: MarketData
    agent: Agent
    options: SessionOptions  # with the DataSource and engine config (no on_turn)
    date: dt.date | None
    days: int
    pace: float | None


Loader = Callable[[argparse.Namespace], "tuple[MarketData, DataSource, str]"]


def _load(args: argparse.Namespace) -> tuple[MarketData, DataSource, str]:
    return load_from_args(args, "simulate")


def _run_simulate(args: argparse.Namespace) -> int:
    from kestrel.session.capture import CaptureWriter

    if is_universe(args):
        return run_universe_command(args)
    run = prepare(args)
    writer = CaptureWriter(args.capture) if args.capture else None
    options = msgspec.structs.replace(run.options, on_turn=writer.turn if writer is not None else None)
    _start_outputs(args, writer, run.data, options, run.agent, run.date, run.days)
    try:
        with evidence_sink(args.evidence) as sink:
            result = _run(run.data, run.agent, options, args.backend, run.date, run.days, sink, args.json,
                          args.agent_timeout, run.pace)
    finally:
        if writer is not None:
            writer.close()
    return _finish(args, result, run.data)


def prepare(args: argparse.Namespace, load: Loader = _load, agent_content: bytes | None = None) -> Prepared:
    """Check and resolve the flags of `kestrel simulate` (raises `UsageError`): paths, data
    (with its `DataSource`), agent, engine config, pace. The daemon resolves `kestrel ctl
    submit` flags through here too (with a caching `load`, and the `--agent` file's bytes as
    stored at submit), so both run the same session."""
    from kestrel.session import profiles
    from kestrel.session.pace import PaceError, parse_pace
    from kestrel.session.loop import LoopSettings
    from kestrel.session.runner import SessionOptions

    for flag, value in (("--max-iterations", args.max_iterations), ("--token-budget", args.token_budget)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if getattr(args, "cadence", None) is not None:
        raise UsageError("--cadence sets a universe session's ordinals; a single-symbol session has OPEN and "
                         "--checkpoints: drop it, or run a universe (--data with a symbol column, --symbols)")
    if getattr(args, "lookback", None) is not None:
        raise UsageError("--lookback sets what a universe plan's windows look back over; a single-symbol session's "
                         "windows are its own: drop it, or run a universe (--data with a symbol column, --symbols)")
    guard_s = parse_guard(args.guard)
    data_input = None if args.data.strip() in ("", "sample") else args.data
    check_paths([("--capture", args.capture), ("--ledger", args.ledger), ("--evidence", args.evidence),
                 ("--report", args.report), ("--png", args.png)],
                [("--data", data_input), ("--agent", agent_input(args.agent)), ("--modes", args.modes),
                 ("--news", args.news)])
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
        effort=args.effort if args.effort is not None else _spec_effort(args.agent),
        self_correct=args.self_correct,
        agent=args.agent,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        constrain=args.constrain,
        reason_first=args.reason_first,
    )
    resolved = profiles.resolve(flags, mode, profile)
    st = resolved.settings
    spec = st.agent or "baseline"
    model = st.model
    if args.agent is not None and args.agent.partition(":")[2].strip() and args.model is None:
        model = None  # an explicit --agent PROVIDER:MODEL wins over a mode's model
    if resolved.note is not None:
        print(f"kestrel simulate: note: {resolved.note}", file=sys.stderr)
    agent = agent_of(spec, model=model, base_url=st.base_url, api_key_env=st.api_key_env,
                     timeout_s=args.agent_timeout, panes=st.panes, content=agent_content,
                     policy=run_policy(args), constrain=st.constrain, reason_first=st.reason_first)
    apply_rate_flags(agent, rate_flags(args))
    _note_unused_loop_flags(args, agent, spec)
    _note_reason_first_without_grammar(agent, st.reason_first)
    data, source, label = load(args)
    news, news_source = news_from_args(args, "simulate")
    source = msgspec.structs.replace(source, news=news_source)
    options = SessionOptions(
        checkpoints=tuple(c for c in args.checkpoints.split(",") if c.strip()),
        guard_s=guard_s,
        settings=LoopSettings.of(st),
        policy=resolved.policy,
        profile=resolved.profile,
        allowed_panes=st.panes,
        data_name=label,
        engine_path=args.engine_path,
        engine=engine_config(args, mode),
        source=source,
        news=news,
        blind=args.blind,
        arm_latency=arm_latency(args.arm_latency),
    )
    date = parse_date(args.date)
    show_blind(agent, data, options)
    check_agent_fits(agent, data, options, date, args.days, st.agent or "baseline")
    if getattr(args, "require_post_cutoff", False):
        from kestrel.cli.agentspec import is_model_agent
        from kestrel.session.runner import pick_sessions

        check_post_cutoff(agent.model if is_model_agent(agent) else None,
                          [s.date.isoformat() for s in pick_sessions(data, date, args.days)], label)
    _warn_partial(data, date, args.days)
    try:
        pace = parse_pace(args.pace)
    except PaceError as exc:
        raise UsageError(str(exc)) from None
    if pace is not None and args.backend == DIRECT:
        raise UsageError("--pace needs the actor feed: use --backend asyncio or trio (or --pace max)")
    return Prepared(data, agent, options, date, args.days, pace)


def _spec_effort(agent: str | None) -> str | None:
    """The `effort=` of a model agent's spec (`--agent PROVIDER:MODEL|effort=LEVEL`), if any."""
    from kestrel.models.spec import AgentSpecError, is_model_spec, parse_spec

    if agent is None or not is_model_spec(agent) or "|" not in agent:
        return None
    try:
        return parse_spec(agent).effort
    except AgentSpecError:
        return None  # refused with its message when the agent is built


def _warn_partial(data: MarketData, date: dt.date | None, days: int) -> None:
    """One stderr line when the run includes a session the data does not span (a file that
    starts or stops mid-session): its results cover only part of the session."""
    from kestrel.session.coverage import coverage
    from kestrel.session.runner import pick_sessions

    partial = [c for c in (coverage(data, s) for s in pick_sessions(data, date, days)) if not c.complete]
    if partial:
        rule = ""
        if date is None and not any(coverage(data, s).complete for s in data.sessions):
            rule = " (no session in the data is complete: the default is the most covered one; choose with --date)"
        print(f"kestrel simulate: warning: {'; '.join(c.describe() for c in partial)}{rule}", file=sys.stderr)


def _modes(path: str | None) -> dict[str, Mode]:
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


def _note_unused_loop_flags(args: argparse.Namespace, agent: Agent, name: str) -> None:
    """Loop knobs do nothing for a single-shot agent: say so on stderr (never on stdout, and
    never in the ledger or capture, so a flagged run stays byte-identical to an unflagged one)."""
    model_flags = [
        flag
        for flag, value in (("--model", args.model), ("--base-url", args.base_url),
                            ("--api-key-env", args.api_key_env), ("--constrain", args.constrain),
                            ("--reason-first", args.reason_first))
        if value is not None
    ]
    if model_flags and lookup(name.partition(":")[0]) is None:
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


def _note_reason_first_without_grammar(agent: Agent, reason_first: bool) -> None:
    """Reason-first splits a constrained reply in two; with no grammar sent it does nothing:
    say so on stderr."""
    config = getattr(agent, "config", None)
    if reason_first and config is not None and getattr(config, "constraint", 0) is None:
        print(f"kestrel simulate: note: no reply grammar is sent to {config.provider}:{config.model} "
              "(see --constrain), so reason-first has no effect on this run", file=sys.stderr)


def _run(data: MarketData, agent: Agent, options: SessionOptions, backend: str, date: dt.date | None,
         days: int, sink: EvidenceSink | None, quiet: bool,
         agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S, pace: float | None = None) -> SessionResult:
    from kestrel.session.runner import run_session

    progress_ctx: AbstractContextManager[Progress | None] = nullcontext(None)
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
        from kestrel.service.actors.driver import run_simulation
        from kestrel.service.actors.feed import Pace

        return run_simulation(data, agent, options, backend=backend, date=date, days=days, sink=sink,
                              progress=tick, agent_timeout=agent_timeout,
                              pace=None if pace is None else Pace(pace))


def _start_outputs(args: argparse.Namespace, writer: CaptureWriter | None, data: MarketData,
                   options: SessionOptions, agent: Agent, date: dt.date | None, days: int) -> None:
    """Once every check passed: a stale ledger at the output path goes (an interrupted run must
    not leave an older run's ledger next to its capture), the capture starts with its header."""
    from kestrel.session.runner import capture_header, session_days

    try:
        if args.ledger:
            Path(os.path.realpath(args.ledger)).unlink(missing_ok=True)  # a symlink stays
        if writer is not None:
            writer.start(capture_header(data, session_days(data, options, date, days), agent.agent_id, options))
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None


def _finish(args: argparse.Namespace, result: SessionResult, data: MarketData, command: str = "simulate",
            recorded: Recorded | None = None, capture: bytes | None = None) -> int:
    """Write the outputs and print the report; a replay's model calls are its `recorded` run's
    (and its capture `capture`, the recorded calls in its turns)."""
    write_file(args.capture, capture if capture is not None else result.capture_jsonl())
    write_file(args.ledger, result.ledger_jsonl())
    if args.report or args.png:
        from kestrel.cli.report import write_run_report
        from kestrel.report import from_result
        from kestrel.report.source import header_sha256

        evidence = None if recorded is None else recorded.evidence
        write_run_report(from_result(result, data, data_sha256=header_sha256(result.header, data),
                                     evidence=evidence, calls_unknown=recorded is not None and evidence is None),
                         args.report, args.png)
    if args.json:
        sys.stdout.write(msgspec.json.encode(summary(result, data, recorded=recorded)).decode() + "\n")
    else:
        report(result, data, command, recorded=recorded)
    failure = result.failure
    if failure is not None:  # what it recorded is written above; the run is still a failure
        print(f"kestrel {command}: {failure.line()}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------------
# replay


def _replay(args: argparse.Namespace) -> int:
    return guarded("replay", lambda: _run_replay(args))


def _run_replay(args: argparse.Namespace) -> int:
    from kestrel.data import DataError
    from kestrel.data.news import open_news
    from kestrel.data.source import open_source
    from kestrel.market.news import NO_NEWS
    from kestrel.session.capture import CaptureError, read_capture

    if is_portfolio_capture(args.capture):
        return run_universe_replay(args)
    if args.data is not None and not args.data.strip():
        raise UsageError("--data is empty: give the path of the moved copy of the captured data file")
    outputs = [("--capture", args.capture_out), ("--ledger", args.ledger), ("--report", args.report),
               ("--png", args.png)]
    if args.news is not None and not args.news.strip():
        raise UsageError("--news is empty: give the path of the moved copy of the captured news file")
    inputs = [("capture", args.capture), ("--data", args.data), ("--news", args.news),
              ("--expect-ledger", args.expect_ledger),
              ("--evidence", args.recorded_evidence)]
    check_paths(outputs, inputs)
    try:
        header, turns = read_capture(args.capture)
    except CaptureError as exc:
        raise UsageError(str(exc)) from None
    recorded = header.source.path if header.source is not None else None
    check_paths(outputs, [*inputs, ("data file recorded in the capture", recorded)])
    if not header.dates:
        raise UsageError(f"{args.capture}: the capture names no session date")
    if header.source is None:
        raise UsageError(f"{args.capture}: the capture records no data source, so its data cannot be checked; "
                         "re-capture it with kestrel simulate ... --capture")
    if args.news is not None and header.source.news is None:
        raise UsageError(f"{args.capture}: the capture was made without news; drop --news")
    if header.ledger_sha256 is None and not args.no_verify:
        raise UsageError(f"{args.capture}: the capture records no ledger checksum (an interrupted run, or one "
                         "edited), so its replay cannot be verified: pass --no-verify to replay it unverified")
    try:
        data = open_source(header.source, args.data)
        news = open_news(header.source.news, args.news) if header.source.news is not None else NO_NEWS
    except DataError as exc:
        raise UsageError(str(exc)) from None
    if data.symbol != header.symbol:
        raise UsageError(f"the data is {data.symbol}, the capture was made on {header.symbol}")
    expected = None
    if args.expect_ledger:
        try:
            expected = Path(args.expect_ledger).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.expect_ledger}: {exc.strerror}") from None
    agent, options = replay_session(header, turns, data, engine_path=args.engine_path, news=news)
    if args.ledger:
        Path(os.path.realpath(args.ledger)).unlink(missing_ok=True)  # a symlink stays
    result = _run(data, agent, options, args.backend, dt.date.fromisoformat(header.dates[-1]),
                  len(header.dates), None, args.json)
    try:
        agent.assert_finished()
    except RuntimeError as exc:
        print(f"kestrel replay: {exc}", file=sys.stderr)
        return 1
    source_name = args.capture
    args.capture = args.capture_out
    code = _finish(args, result, data, "replay", recorded_calls(header.agent, args.recorded_evidence, turns),
                   with_recorded_calls(result.capture_jsonl(), turns) if args.capture else None)
    ledger = result.ledger_jsonl()
    if expected is not None and expected != ledger:
        print(f"kestrel replay: the replayed ledger differs from --expect-ledger {args.expect_ledger}: "
              + first_difference(expected, ledger), file=sys.stderr)
        return 1
    digest = hashlib.sha256(ledger).hexdigest()
    if header.ledger_sha256 is None:
        print(f"kestrel replay: note: {source_name} records no ledger checksum (an interrupted run?): "
              "the replayed ledger is not verified (--no-verify)", file=sys.stderr)
    elif digest != header.ledger_sha256:
        print(f"kestrel replay: the replayed ledger differs from the captured run's (sha256 {digest[:16]}…, "
              f"recorded {header.ledger_sha256[:16]}…); pass --expect-ledger with that run's ledger to see "
              "the first differing line", file=sys.stderr)
        return 1
    else:
        what = " and --expect-ledger" if expected is not None else ""
        print(f"kestrel replay: ledger identical to the captured run's{what} (sha256 {digest[:16]}…)", file=sys.stderr)
    return code


def recorded_calls(agent_id: str, path: str | None, turns: Sequence[CapturedTurn] = ()) -> Recorded | None:
    """A replay's model calls: those of the recorded run's evidence file `path`, else those its
    captured `turns` record (unknown when neither has them); None when the captured agent is
    not a model (it made no call to show)."""
    from kestrel.report.evidence import EvidenceError, Recorded, read_evidence
    from kestrel.report.run import recorded_model

    captured = calls_evidence(turns) if path is None else []
    if recorded_model(agent_id) is None and path is None and not captured:
        return None
    if path is None:
        return Recorded(tuple(captured) if captured else None)
    try:
        return Recorded(tuple(read_evidence(path)))
    except EvidenceError as exc:
        raise UsageError(str(exc)) from None


__all__ = ["Prepared", "prepare", "register", "report", "summary"]
