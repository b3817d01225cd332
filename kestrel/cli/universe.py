"""`kestrel simulate` over a universe: `--data` a long-format file (a `symbol` column), a folder
or a glob of per-symbol files, `--symbols A,B` to select, one account (`--capital`,
`--no-short`, `--max-open`, `--max-gross`, `--portfolio-maxloss`), factor rows (`--factors`);
`kestrel replay` and `kestrel report` of its capture.

The session runs in process (`kestrel.session.portfolio.run_portfolio`, `--backend direct`) or on
the actor shell (`--backend asyncio|trio`, the same ledger and capture). Its outputs: the
portfolio report (`kestrel.report.portfolio`) as text, as JSON (`--json`) or as an HTML page
(`--report`); `--ledger` the portfolio ledger; `--capture` the run's capture (`PortfolioCapture`)
headed by how the universe was loaded (`UniverseSource`) and the SHA-256 of the run's ledger,
so `kestrel replay CAPTURE` loads the same universe, re-runs the recorded turns and verifies the
ledger byte for byte. The header keys lead the capture's JSON object, so the file still decodes
as a `PortfolioCapture`.
"""

from __future__ import annotations

import argparse
import glob as globs
import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.callflags import arm_latency
from kestrel.cli.dataflags import check_paths, news_from_args, parse_date, parse_guard, positive_float
from kestrel.cli.errors import UsageError
from kestrel.cli.writes import evidence_sink, write_file

if TYPE_CHECKING:
    from kestrel.data.news import NewsSource
    from kestrel.market.news import NewsFeed
    from kestrel.session.portfolio_capture import CaptureHead, UniverseSource
    from kestrel.market.portfolio import PortfolioBounds
    from kestrel.market.universe import Universe
    from kestrel.report.portfolio import PortfolioReport
    from kestrel.session.portfolio import PortfolioCapture, PortfolioResult
    from kestrel.session.protocol import Agent

def add_universe_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--symbols", default=None, metavar="A,B,...",
                   help="trade these symbols of a universe --data (a long-format file with a symbol column, "
                        "a folder or a glob of per-symbol files); default: every symbol")
    p.add_argument("--factors", default=None, metavar="PATH",
                   help="a factor file (Lean's format) of the universe's splits and dividends")
    p.add_argument("--instruments", default=None, metavar="PATH",
                   help="a universe's symbols table: a CSV with symbol and any of tick_size, multiplier, currency, "
                        "lot_size (0.0001 trades BTC in lots of 0.0001; default: inferred tick, 1, USD, 1)")
    p.add_argument("--capital", type=positive_float, default=None, metavar="CASH",
                   help="a universe session's starting cash (default 100000)")
    p.add_argument("--no-short", action="store_true", help="refuse any order that would open or grow a short")
    p.add_argument("--max-open", type=int, default=None, metavar="N", help="at most N symbols held at once")
    p.add_argument("--max-gross", type=positive_float, default=None, metavar="X",
                   help="gross exposure at most X times equity (default 1)")
    p.add_argument("--portfolio-maxloss", type=positive_float, default=None, metavar="CASH",
                   help="a loss from the session's opening equity that stands every plan down and flattens")
    p.add_argument("--lookback", choices=("run", "session"), default=None,
                   help="what a universe plan's windows and indicators look back over: run (the default: the "
                        "run's earlier sessions too, so chg(1d) and sma(last,20,1d) work on daily bars) or session "
                        "(each session starts cold)")
    p.add_argument("--cadence", choices=("open", "close"), default=None,
                   help="a universe session's ordinals: open (OPEN and the checkpoints, the default) or close "
                        "(one CLOSE per session, the day's whole bar seen; its plans take effect at the next open)")


def is_universe(args: argparse.Namespace) -> bool:
    """Whether the command line runs a universe: `--symbols`, a portfolio flag, a folder or a
    glob as `--data`, or a data file with a `symbol` column unless `--symbol` picks one member."""
    if args.symbols is not None or args.capital is not None or args.no_short or args.max_open is not None \
            or args.max_gross is not None or args.portfolio_maxloss is not None or args.factors is not None \
            or getattr(args, "instruments", None) is not None:
        return True
    name = (args.data or "").strip()
    if name in ("", "sample") or getattr(args, "symbol", None):  # --symbol: one member of a long file
        return False
    if Path(name).is_dir() or globs.has_magic(name):
        return True
    if not Path(name).is_file():  # a pipe or FIFO is read once, by the single-symbol loader: never probed
        return False
    from kestrel.data import DataError
    from kestrel.data.readers import file_header

    try:
        header = file_header(name, args.delimiter or ",")
    except (DataError, OSError):
        return False
    return header is not None and any(h.strip().lower() == "symbol" for h in header)


def _abs(path: str) -> str:
    """`path` made absolute (a glob keeps its pattern), so a capture replays from any folder."""
    return os.path.abspath(os.path.expanduser(path))


def load_source(source: UniverseSource, symbols: list[str] | None, command: str) -> Universe:
    """The universe `source` names, narrowed to `symbols` (raises `UsageError` naming the fix);
    the load report's notes go to stderr."""
    from kestrel.data import DataError
    from kestrel.data.universe import load_universe

    try:
        loaded = load_universe(source.data, columns=source.columns, symbols=symbols, factors=source.factors,
                               instruments=source.instruments,
                               crossed=source.crossed, spikes=source.spikes, delimiter=source.delimiter)
    except DataError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {source.data}: {exc.strerror or exc}") from None
    for line in loaded.report.notes():
        print(f"kestrel {command}: {line}", file=sys.stderr)
    return loaded.universe


def _refuse_single_symbol_flags(args: argparse.Namespace, command: str) -> None:
    if getattr(args, "png", None):
        raise UsageError("--png charts one symbol's run; a universe run writes its HTML page with --report")
    if getattr(args, "pace", "max") not in (None, "max"):
        raise UsageError("--pace paces a single-symbol session; a universe session runs in process at full "
                         "speed: drop it, or run one member with --symbol")


def source_of(args: argparse.Namespace) -> UniverseSource:
    """How the command line's universe loads (`--data` made absolute, `--columns`, `--factors`,
    `--delimiter`, `--crossed`, `--spikes`, `--instruments`)."""
    from kestrel.session.portfolio_capture import UniverseSource

    return UniverseSource(_abs(args.data.strip()), args.columns,
                          None if args.factors is None else _abs(args.factors), args.delimiter or ",",
                          args.crossed or "error", args.spikes or "error",
                          None if args.instruments is None else _abs(args.instruments))


def universe_bounds(args: argparse.Namespace) -> PortfolioBounds:
    """The account's bounds the command line gives (`--capital`, `--max-gross`, `--max-open`,
    `--portfolio-maxloss`, `--no-short`, `--lookback`); `UsageError` on a bad one."""
    from kestrel.market.portfolio import PortfolioBounds
    from kestrel.session.portfolio import DEFAULT_CAPITAL

    try:
        return PortfolioBounds(capital=args.capital or DEFAULT_CAPITAL, max_gross=args.max_gross or 1.0,
                               max_open=args.max_open, session_maxloss=args.portfolio_maxloss,
                               no_short=args.no_short, lookback=args.lookback or "run")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def run_universe_command(args: argparse.Namespace) -> int:
    from kestrel.session.options import SessionError, SessionOptions
    from kestrel.session.portfolio import run_portfolio

    from kestrel.cli.execution import engine_config

    _refuse_single_symbol_flags(args, "simulate")
    check_paths([("--capture", args.capture), ("--ledger", args.ledger), ("--report", args.report),
                 ("--evidence", getattr(args, "evidence", None))],
                [("--data", args.data), ("--factors", args.factors), ("--news", args.news),
                 ("--instruments", args.instruments)])
    if args.backend in ("asyncio", "trio"):  # on actors: the ledger and capture of --backend direct
        from kestrel.service.actors.portfolio import universe_runner

        run_portfolio = universe_runner(args.backend)
    symbols = None if args.symbols is None else [s.strip() for s in args.symbols.split(",") if s.strip()]
    if symbols is not None and not symbols:
        raise UsageError("--symbols is empty: give symbols like AAPL,MSFT")
    source = source_of(args)
    universe = load_source(source, symbols, "simulate")
    bounds = universe_bounds(args)
    news, news_source = news_from_args(args, "simulate")
    try:
        options = SessionOptions(checkpoints=tuple(c for c in args.checkpoints.split(",") if c.strip()),
                                 guard_s=parse_guard(args.guard), engine_path=args.engine_path,
                                 engine=engine_config(args, None), blind=args.blind, news=news,
                                 arm_latency=arm_latency(args.arm_latency), cadence=args.cadence or "open",
                                 universe_end_of_day=getattr(args, "end_of_day", None))
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    agent = _agent(args)
    try:
        with evidence_sink(getattr(args, "evidence", None)) as sink:
            result = run_portfolio(universe, agent, bounds, options, date=parse_date(args.date), days=args.days,
                                   sink=sink, news_sha256=None if news_source is None else news_source.sha256)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    _outputs(args, result, source, args.capture, news_source)
    return 0


def _outputs(args: argparse.Namespace, result: PortfolioResult, source: UniverseSource, capture: str | None,
             news: NewsSource | None = None) -> None:
    """Write the ledger, the capture and the HTML page; print the report (text or JSON)."""
    from kestrel.report.portfolio import from_portfolio_run
    from kestrel.session.portfolio_capture import capture_bytes

    ledger = result.ledger.to_jsonl()
    write_file(args.ledger, ledger)
    write_file(capture, capture_bytes(source, result.capture, ledger, news))
    rep = from_portfolio_run(result.engine, result.capture.dates)
    _print_report(args, rep, result)


def _print_report(args: argparse.Namespace, rep: PortfolioReport, result: PortfolioResult | None) -> None:
    from kestrel.report.portfolio import to_json
    from kestrel.report.portfolio_page import portfolio_text, render_portfolio

    if args.report:
        write_file(args.report, render_portfolio(rep).encode("utf-8"))
    if getattr(args, "json", False):
        body = to_json(rep)
        if result is not None:
            from kestrel.session.portfolio import run_summary

            body.update(run_summary(result))
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
    else:
        sys.stdout.write("\n".join(portfolio_text(rep)) + "\n")


def is_portfolio_capture(path: str) -> bool:
    """Whether the file at `path` is a portfolio capture (it begins with `CAPTURE_LEAD`)."""
    from kestrel.session.portfolio_capture import CAPTURE_LEAD

    try:
        with open(path, "rb") as f:
            return f.read(len(CAPTURE_LEAD)) == CAPTURE_LEAD
    except OSError:
        return False


def read_portfolio_capture(path: str) -> tuple[CaptureHead, PortfolioCapture]:
    from kestrel.session.portfolio import PortfolioCapture
    from kestrel.session.portfolio_capture import CaptureHead

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return msgspec.json.decode(raw, type=CaptureHead), PortfolioCapture.from_json(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UsageError(f"{path}: not a portfolio capture ({exc}); write one with kestrel simulate --data "
                         "UNIVERSE ... --capture") from None


def _moved(head: CaptureHead, data: str | None) -> UniverseSource:
    if data is None:
        return head.universe
    if not data.strip():
        raise UsageError("--data is empty: give the path of the moved copy of the captured universe")
    return msgspec.structs.replace(head.universe, data=_abs(data.strip()))


def _news_of(head: CaptureHead, capture: PortfolioCapture, moved: str | None) -> NewsFeed:
    """The captured run's news, read again from its recorded path (or `moved`, a copy): bytes
    whose SHA-256 is not the recorded one are refused (`UsageError`)."""
    from kestrel.data import DataError
    from kestrel.data.news import open_news
    from kestrel.market.news import NO_NEWS

    if isinstance(head.news, msgspec.UnsetType):
        if moved is not None:
            raise UsageError("the capture was made without news; drop --news")
        return NO_NEWS
    if moved is not None and not moved.strip():
        raise UsageError("--news is empty: give the path of the moved copy of the captured news file")
    if not isinstance(capture.news_sha256, msgspec.UnsetType) and capture.news_sha256 != head.news.sha256:
        raise UsageError("the capture's news checksums disagree (header and run): the file was edited")
    try:
        return open_news(head.news, moved)
    except DataError as exc:
        raise UsageError(str(exc)) from None


def _replayed(head: CaptureHead, capture: PortfolioCapture, data: str | None, command: str,
              news: str | None = None) -> PortfolioResult:
    from kestrel.session.options import SessionError
    from kestrel.session.portfolio import replay

    feed = _news_of(head, capture, news)  # before the universe loads: a wrong news file is the one line
    universe = load_source(_moved(head, data), list(capture.symbols), command)
    missing = [d for d in capture.dates if d not in {s.date.isoformat() for s in universe.sessions}]
    if missing:
        raise UsageError(f"the universe has no session on {missing[0]}, a session of the capture: give the "
                         "captured data with --data")
    try:
        return replay(universe, capture, feed)
    except (SessionError, KeyError, ValueError) as exc:
        raise UsageError(f"the capture does not replay on {', '.join(universe.symbols)}: {exc}") from None


def run_universe_replay(args: argparse.Namespace) -> int:
    """`kestrel replay` of a portfolio capture: the ledger reproduced and verified byte for byte
    against the SHA-256 the capture records (and `--expect-ledger` when given)."""
    from kestrel.cli.replays import first_difference

    _refuse_single_symbol_flags(args, "replay")
    head, capture = read_portfolio_capture(args.capture)
    check_paths([("--capture", args.capture_out), ("--ledger", args.ledger), ("--report", args.report)],
                [("capture", args.capture), ("--data", args.data), ("--expect-ledger", args.expect_ledger),
                 ("universe recorded in the capture", head.universe.data)])
    expected = None
    if args.expect_ledger:
        try:
            expected = Path(args.expect_ledger).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.expect_ledger}: {exc.strerror}") from None
    if head.ledger_sha256 is None and not args.no_verify:
        raise UsageError(f"{args.capture}: the capture records no ledger checksum, so its replay cannot be "
                         "verified: pass --no-verify to replay it unverified")
    result = _replayed(head, capture, args.data, "replay", args.news)
    _outputs(args, result, _moved(head, args.data), args.capture_out,
             None if isinstance(head.news, msgspec.UnsetType) else head.news)
    ledger = result.ledger.to_jsonl()
    if expected is not None and expected != ledger:
        print(f"kestrel replay: the replayed ledger differs from --expect-ledger {args.expect_ledger}: "
              + first_difference(expected, ledger), file=sys.stderr)
        return 1
    digest = hashlib.sha256(ledger).hexdigest()
    if head.ledger_sha256 is not None and digest != head.ledger_sha256:
        print(f"kestrel replay: the replayed ledger differs from the captured run's (sha256 {digest[:16]}…, "
              f"recorded {head.ledger_sha256[:16]}…); pass --expect-ledger with that run's ledger to see "
              "the first differing line", file=sys.stderr)
        return 1
    if head.ledger_sha256 is not None:
        print(f"kestrel replay: ledger identical to the captured run's (sha256 {digest[:16]}…)", file=sys.stderr)
    return 0


def run_universe_report(args: argparse.Namespace) -> int:
    """`kestrel report --capture` of a portfolio capture: the HTML page from the run's ledger
    (`--ledger`, checked against the capture's SHA-256) or from replaying the capture."""
    from kestrel.report.portfolio import portfolio_report
    from kestrel.report.portfolio_ledger import PortfolioLedgerError

    if args.png is not None or args.evidence is not None:
        raise UsageError("--png and --evidence apply to single-symbol reports; drop them for a universe run")
    head, capture = read_portfolio_capture(args.capture)
    check_paths([("-o", args.output)], [("--capture", args.capture), ("--ledger", args.ledger),
                                        ("universe recorded in the capture", head.universe.data)])
    universe: Universe | None = None
    if args.ledger is None:
        result = _replayed(head, capture, None, "report")
        universe = result.engine.universe
        ledger = result.ledger.to_jsonl()
        if head.ledger_sha256 is not None and hashlib.sha256(ledger).hexdigest() != head.ledger_sha256:
            raise UsageError(f"replaying {args.capture} does not give the captured run's ledger (is the universe "
                             "file changed?); pass the run's --ledger")
    else:
        try:
            ledger = Path(args.ledger).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.ledger}: {exc.strerror}") from None
        got = hashlib.sha256(ledger).hexdigest()
        if head.ledger_sha256 is not None and got != head.ledger_sha256:
            raise UsageError(f"{args.ledger} is not this capture's ledger: its sha256 is {got}, {args.capture} "
                             f"records {head.ledger_sha256}; pass the ledger written with the capture, or drop "
                             "--ledger to replay the capture")
    if universe is None:
        universe = load_source(head.universe, list(capture.symbols), "report").select(list(capture.symbols))
    try:
        rep = portfolio_report(universe, ledger, capture.bounds.capital, capture.dates, configs=capture.configs)
    except (PortfolioLedgerError, ValueError) as exc:
        raise UsageError(f"{args.ledger or args.capture}: {exc}") from None
    args.report = args.output
    _print_report(args, rep, None)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _agent(args: argparse.Namespace) -> Agent:
    from kestrel.session.portfolio import ModuleAgent

    spec = args.agent or ""
    if spec.startswith("fixed:"):
        path = Path(spec.removeprefix("fixed:"))
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the plan file {str(path)!r}: {exc}") from None
        return ModuleAgent(text, path.stem)
    if spec.startswith("replies:"):  # the loop offline: each block one reply (VIEW, a module of plans, ...)
        from kestrel.agents.replies import RepliesAgent, RepliesError

        try:
            return RepliesAgent.from_file(spec.removeprefix("replies:"))
        except RepliesError as exc:
            raise UsageError(str(exc)) from None
    if not spec or spec == "baseline":
        raise UsageError("a universe session needs --agent fixed:PLANS.kes (plans ON each symbol), "
                         "replies:FILE or a model agent (--agent PROVIDER:MODEL)")
    from kestrel.cli.agentspec import agent_of

    return agent_of(spec, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                    timeout_s=args.agent_timeout)


__all__ = ["add_universe_flags", "is_portfolio_capture", "is_universe", "load_source", "read_portfolio_capture", "run_universe_command", "run_universe_replay", "run_universe_report", "source_of",
           "universe_bounds"]
