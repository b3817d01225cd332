"""`kestrel simulate` over a universe: `--data` a long-format file (a `symbol` column), a folder
or a glob of per-symbol files, `--symbols A,B` to select, one account (`--capital`,
`--no-short`, `--max-open`, `--max-gross`, `--portfolio-maxloss`), factor rows (`--factors`).

The session runs in process (`kestrel.session.portfolio.run_portfolio`); `--ledger` writes the
portfolio ledger, `--capture` the run's capture (its replay input, `replay`), and the report is
the account and one line per symbol.
"""

from __future__ import annotations

import argparse
import glob as globs
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.dataflags import parse_date, parse_guard, positive_float
from kestrel.cli.errors import UsageError

if TYPE_CHECKING:
    from kestrel.session.portfolio import PortfolioResult
    from kestrel.session.protocol import Agent


def add_universe_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--symbols", default=None, metavar="A,B,...",
                   help="trade these symbols of a universe --data (a long-format file with a symbol column, "
                        "a folder or a glob of per-symbol files); default: every symbol")
    p.add_argument("--factors", default=None, metavar="PATH",
                   help="a factor file (Lean's format) of the universe's splits and dividends")
    p.add_argument("--capital", type=positive_float, default=None, metavar="CASH",
                   help="a universe session's starting cash (default 100000)")
    p.add_argument("--no-short", action="store_true", help="refuse any order that would open or grow a short")
    p.add_argument("--max-open", type=int, default=None, metavar="N", help="at most N symbols held at once")
    p.add_argument("--max-gross", type=positive_float, default=None, metavar="X",
                   help="gross exposure at most X times equity (default 1)")
    p.add_argument("--portfolio-maxloss", type=positive_float, default=None, metavar="CASH",
                   help="a loss from the session's opening equity that stands every plan down and flattens")


def is_universe(args: argparse.Namespace) -> bool:
    """Whether the command line runs a universe: `--symbols`, a portfolio flag, a folder or a
    glob as `--data`, or a data file with a `symbol` column."""
    if args.symbols is not None or args.capital is not None or args.no_short or args.max_open is not None \
            or args.max_gross is not None or args.portfolio_maxloss is not None or args.factors is not None:
        return True
    name = (args.data or "").strip()
    if name in ("", "sample"):
        return False
    if Path(name).is_dir() or globs.has_magic(name):
        return True
    from kestrel.data import DataError
    from kestrel.data.readers import file_header

    try:
        header = file_header(name, args.delimiter or ",")
    except (DataError, OSError):
        return False
    return header is not None and any(h.strip().lower() == "symbol" for h in header)


def run_universe_command(args: argparse.Namespace) -> int:
    from kestrel.data import DataError
    from kestrel.data.universe import load_universe
    from kestrel.market.portfolio import PortfolioBounds
    from kestrel.session.options import SessionError, SessionOptions
    from kestrel.session.portfolio import DEFAULT_CAPITAL, run_portfolio

    from kestrel.cli.execution import engine_config

    if args.backend != "direct" and "--backend" in sys.argv:
        print("kestrel simulate: note: a universe session runs in process (--backend direct)", file=sys.stderr)
    symbols = None if args.symbols is None else [s.strip() for s in args.symbols.split(",") if s.strip()]
    if symbols is not None and not symbols:
        raise UsageError("--symbols is empty: give symbols like AAPL,MSFT")
    try:
        loaded = load_universe(args.data.strip(), columns=args.columns, symbols=symbols, factors=args.factors,
                               crossed=args.crossed or "error", spikes=args.spikes or "error",
                               delimiter=args.delimiter or ",")
    except DataError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {args.data}: {exc.strerror or exc}") from None
    for line in loaded.report.notes():
        print(f"kestrel simulate: {line}", file=sys.stderr)
    try:
        bounds = PortfolioBounds(capital=args.capital or DEFAULT_CAPITAL, max_gross=args.max_gross or 1.0,
                                 max_open=args.max_open, session_maxloss=args.portfolio_maxloss,
                                 no_short=args.no_short)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    options = SessionOptions(checkpoints=tuple(c for c in args.checkpoints.split(",") if c.strip()),
                             guard_s=parse_guard(args.guard), engine_path=args.engine_path,
                             engine=engine_config(args, None))
    agent = _agent(args)
    try:
        result = run_portfolio(loaded.universe, agent, bounds, options, date=parse_date(args.date), days=args.days)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    _write(args.ledger, result.ledger.to_jsonl())
    _write(args.capture, result.capture.to_json() + b"\n")
    if args.json:
        sys.stdout.write(msgspec.json.encode(_summary(result)).decode() + "\n")
    else:
        sys.stdout.write(_text(result))
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
    if not spec or spec == "baseline":
        raise UsageError("a universe session needs --agent fixed:PLANS.kes (plans ON each symbol) or a model "
                         "agent (--agent PROVIDER:MODEL)")
    from kestrel.cli.agentspec import agent_of

    return agent_of(spec, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                    timeout_s=args.agent_timeout)


def _summary(result: PortfolioResult) -> dict[str, object]:
    from kestrel.engine.ledger import Filled

    state = result.engine.state()
    fills: dict[str, int] = {s: 0 for s in result.engine.symbols}
    for s, e in result.ledger.entries:
        if isinstance(e, Filled) and s is not None:
            fills[s] += 1
    return {"symbols": list(result.engine.symbols), "sessions": list(result.capture.dates),
            "capital": state.capital, "cash": state.cash, "equity": state.equity, "gross": state.gross,
            "net": state.net, "open_positions": state.open_positions,
            "holdings": [{"symbol": h.symbol, "position": h.position, "value": h.value, "rpnl": h.rpnl,
                          "fills": fills[h.symbol]} for h in state.holdings],
            "turns": [{"date": t.date, "ordinal": t.ordinal, "applied": t.applied} for t in result.turns]}


def _text(result: PortfolioResult) -> str:
    d = _summary(result)
    state = result.engine.state()
    lines = [f"universe {', '.join(result.engine.symbols)}: {len(result.capture.dates)} sessions "
             f"{result.capture.dates[0]} to {result.capture.dates[-1]}",
             f"account {state.currency}: capital {state.capital:.2f} cash {state.cash:.2f} equity {state.equity:.2f} "
             f"gross {state.gross:.2f} net {state.net:.2f} open {state.open_positions}"]
    holdings = d["holdings"]
    assert isinstance(holdings, list)
    for h in holdings:
        lines.append(f"  {h['symbol']}: position {h['position']} value {h['value']:.2f} realized {h['rpnl']:.2f} "
                     f"fills {h['fills']}")
    return "\n".join(lines) + "\n"


def _write(path: str | None, data: bytes) -> None:
    from kestrel.outputs import atomic_write

    if path is None:
        return
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


__all__ = ["add_universe_flags", "is_universe", "run_universe_command"]
