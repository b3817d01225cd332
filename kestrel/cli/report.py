"""`kestrel report`: a run's self-contained HTML page (from a capture, with or without its
ledger) or a sweep's leaderboard; plus the terminal summary and an optional PNG."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kestrel.cli.errors import UsageError
from kestrel.cli.subcommands import Subcommands

if TYPE_CHECKING:  # the report modules load only when a report is made
    from kestrel.report.stats.board import Board, Row
    from kestrel.report.run import RunReport
    from kestrel.report.stats import SessionRecord


def register(subparsers: Subcommands) -> None:
    r = subparsers.add_parser(
        "report",
        help="write a run's HTML report (from a capture and ledger) or a sweep's leaderboard",
        description=(
            "Write one self-contained HTML file (inline SVG and CSS, no script, nothing from the "
            "network). With --capture: the run's equity marked to market, drawdown, price with fills "
            "and stop/target levels, turns, round trips, rejections and disarms, metrics against "
            "buy-and-hold and flat; the capture is replayed when no --ledger is given. With --sweep: "
            "the leaderboard of a `kestrel sweep` directory."
        ),
    )
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--capture", help="a capture written by `kestrel simulate --capture`")
    src.add_argument("--sweep", help="a directory written by `kestrel sweep --out`")
    r.add_argument("--ledger", help="the run's ledger, the one written with the capture (its SHA-256 must be the one "
                                       "the capture records); default: replay the capture to get it")
    r.add_argument("--evidence", help="the run's evidence (simulate --evidence, a sweep run's evidence.jsonl): the "
                                       "model, tokens and dollars of its calls are shown (without it: unknown)")
    r.add_argument("-o", "--output", required=True, help="the HTML file to write")
    r.add_argument("--png", help="also write a PNG chart (needs `pip install 'kestrel[plot]'`)")
    r.add_argument("--usd-rate", action="append", metavar="CUR=RATE",
                   help="with --sweep: dollars per unit of CUR for the net-of-model-cost column of PnL in CUR")
    r.set_defaults(func=_report)


def check_report_paths(args: argparse.Namespace) -> None:
    """The outputs (`-o`, `--png`) against each other and every input (the capture, its ledger,
    the data file the capture records), refused before anything is read or written."""
    from kestrel.cli.dataflags import check_paths
    from kestrel.cli.datanames import recorded_data_path

    recorded = recorded_data_path(args.capture) if args.capture else None
    check_paths([("-o", args.output), ("--png", args.png)],
                [("--capture", args.capture), ("--ledger", args.ledger), ("--evidence", args.evidence),
                 ("data file recorded in the capture", recorded)])


def write_text(path: str, text: str) -> None:
    """Write `path` atomically (a temporary file renamed into place)."""
    from kestrel.outputs import atomic_write

    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def write_run_report(rep: RunReport, html_path: str | None, png_path: str | None = None) -> None:
    """The run's HTML page (and PNG) at the given paths."""
    from kestrel.report.html import render_run

    if html_path is not None:
        write_text(html_path, render_run(rep))
    if png_path is not None:
        from kestrel.report.png import PlotUnavailable, write_png

        try:
            write_png(rep, png_path)
        except PlotUnavailable as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write {png_path}: {exc.strerror}") from None


def print_summary(rep: RunReport) -> None:
    """The terminal summary: an equity sparkline and the key metrics."""
    from kestrel.report.text import instrument_line, metric_rows, money, sparkline

    h = rep.header
    dec = rep.shown_decimals
    print(f"{h.agent} on {h.symbol} {', '.join(h.dates)}  data {h.data} sha256 {(h.data_sha256 or '?')[:16]}")
    if h.instrument is not None:
        print(f"instrument {instrument_line(h.instrument)}")
    print(f"equity {sparkline(rep.curve)} {money(rep.metrics.net_pnl, dec, sign=True)} {h.currency}")
    print("  ".join(f"{k} {v}" for k, v in metric_rows(rep.metrics, rep.days, dec)))
    for name, m in rep.baselines.items():
        print(f"baseline {name}: net {money(m.net_pnl, dec, sign=True)}  max dd {money(m.max_drawdown, dec)}")


def _report(args: argparse.Namespace) -> int:
    from kestrel.cli.errors import guarded

    return guarded("report", lambda: _run_report(args))


def _run_report(args: argparse.Namespace) -> int:
    from kestrel.cli.universe import is_portfolio_capture, run_universe_report

    if args.capture is not None and is_portfolio_capture(args.capture):
        if args.usd_rate:
            raise UsageError("--usd-rate applies to --sweep reports only")
        return run_universe_report(args)
    check_report_paths(args)
    if args.sweep is not None:
        if args.ledger is not None or args.png is not None or args.evidence is not None:
            raise UsageError("--ledger, --evidence and --png apply to --capture reports only")
        return _sweep_report(args)
    if args.usd_rate:
        raise UsageError("--usd-rate applies to --sweep reports only")
    rep = run_report_of(args.capture, args.ledger, args.evidence)
    write_run_report(rep, args.output, args.png)
    print_summary(rep)
    print(f"wrote {args.output}" + (f" and {args.png}" if args.png else ""), file=sys.stderr)
    return 0


def run_report_of(capture: str, ledger_path: str | None, evidence_path: str | None = None) -> RunReport:
    """The report of a capture: with its ledger as given, else by replaying the capture; the
    model calls' tokens and dollars from the run's evidence file when given, else from the
    calls the capture's turns record (else unknown)."""
    from kestrel.report.evidence import EvidenceError, read_evidence

    try:
        evidence = None if evidence_path is None else read_evidence(evidence_path)
    except EvidenceError as exc:
        raise UsageError(str(exc)) from None
    import datetime as dt

    from kestrel.cli.datanames import capture_data
    from kestrel.engine.ledger import Ledger
    from kestrel.report import from_ledger, from_result
    from kestrel.report.source import header_sha256
    from kestrel.session.capture import CaptureError, read_capture
    from kestrel.session.runner import run_session

    try:
        header, turns = read_capture(capture)
    except CaptureError as exc:
        raise UsageError(str(exc)) from None
    if not header.dates:
        raise UsageError(f"{capture}: the capture names no session date")
    data = capture_data(header)
    sha = header_sha256(header, data)
    if evidence is None:  # the model calls the capture's turns record, if any
        from kestrel.cli.replays import calls_evidence

        evidence = calls_evidence(turns) or None
    if ledger_path is not None:
        try:
            raw = Path(ledger_path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {ledger_path}: {exc.strerror}") from None
        check_ledger(capture, header.ledger_sha256, ledger_path, raw)
        try:
            ledger = Ledger.from_jsonl(raw)
        except ValueError as exc:
            raise UsageError(f"{ledger_path}: not a Kestrel ledger: {exc}") from None
        missing = [d for d in header.dates if d not in {s.date.isoformat() for s in data.sessions}]
        if missing:
            raise UsageError(f"the data holds no session on {', '.join(missing)}")
        return from_ledger(header, turns, ledger, data, data_sha256=sha, evidence=evidence)
    from kestrel.cli.replays import replay_session

    # the run the capture was made under (engine, arm latency, blind mode): the replay is that run
    agent, options = replay_session(header, turns, data)
    result = run_session(data, agent, options, date=dt.date.fromisoformat(header.dates[-1]), days=len(header.dates))
    return from_result(result, data, data_sha256=sha, evidence=evidence, calls_unknown=evidence is None)


def check_ledger(capture: str, recorded: str | None, ledger_path: str, raw: bytes) -> None:
    """Refuse a ledger that is not the capture's own: the capture's header records its ledger's
    SHA-256 (a capture without one, from an interrupted run, cannot vouch for any ledger)."""
    import hashlib

    if recorded is None:
        raise UsageError(f"{capture} records no ledger checksum (an interrupted run's capture), so "
                         f"{ledger_path} cannot be checked against it; drop --ledger to replay the capture")
    got = hashlib.sha256(raw).hexdigest()
    if got != recorded:
        raise UsageError(f"{ledger_path} is not this capture's ledger: its sha256 is {got}, {capture} "
                         f"records {recorded}; pass the ledger written with the capture, or drop --ledger to "
                         "replay the capture")


def _sweep_report(args: argparse.Namespace) -> int:
    from kestrel.cli.callflags import parse_usd_rates
    from kestrel.sweep.results import stored_rows

    out = Path(args.sweep)
    if not out.is_dir():
        raise UsageError(f"--sweep {args.sweep}: no such directory (run `kestrel sweep --out {args.sweep}` first)")
    rows = stored_rows(out)
    if not rows:
        raise UsageError(f"--sweep {args.sweep}: no finished or failed runs in it")
    board, _ = sweep_board(out, rows, usd_rates=parse_usd_rates(args.usd_rate or []))
    write_text(args.output, board.html(title=f"Kestrel sweep {out.name}"))
    print_board(board)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def sweep_board(out: Path, rows: Sequence[Row], *, usd_rates: dict[str, float] | None = None
                ) -> tuple[Board, list[SessionRecord]]:
    """The leaderboard of a sweep directory's `rows` (from their runs' per-session records)."""
    from kestrel.report.stats.board import Board
    from kestrel.report.stats import StatsError
    from kestrel.sweep.results import stored_records

    records = stored_records(out, [str(r["key"]) for r in rows if not r.get("error")])
    try:
        return Board(rows, records, usd_rates=usd_rates), records
    except StatsError as exc:
        raise UsageError(str(exc)) from None


def print_board(board: Board) -> None:
    for line in board.text_lines():
        print(line)


__all__ = ["check_ledger", "print_board", "sweep_board", "print_summary", "register", "run_report_of", "write_run_report", "write_text"]
