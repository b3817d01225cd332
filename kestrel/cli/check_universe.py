"""`kestrel check --data UNIVERSE` / `kestrel check --symbols A,B`: each file checked as one reply
of a universe turn, by the rules a universe run reads it with.

The universe is either loaded (`--data` a long-format file, a folder or a glob; `--symbols` to
narrow it; `--instruments`, `--columns`, `--delimiter` as `kestrel simulate` takes them), each
symbol's lot the one its engine config takes from the instrument
(`kestrel.session.portfolio_day.universe_configs`), or named (`--symbols` alone), every symbol
with the lot `--lot-size` (default 1). `--blind` (with `--data`) checks the reply a blind run's
agent writes: the symbols are the run's aliases (`SYM1`, ...; `kestrel.session.blind.blind_of`).
A file is then:
1. parsed with the universe's limits (`kestrel.session.ports.TURN_LIMITS`: a plan per symbol and
   one more statement, windows as long as a run looks back) and its symbols (a cross-symbol read
   `SPY.chg(1d)` must name one), quantities whole numbers of the smallest lot: every problem is a
   located diagnostic, as `kestrel check` prints them;
2. read as the run reads a reply (`kestrel.session.ports.interpret_module`: PLANs each ON a
   symbol of the universe, one per symbol, each checked against its own symbol's lot;
   `STANDDOWN [ON SYM]`; `PASS`; or one VIEW, whose panes must then name symbols of the
   universe): the first problem the run would send back is one diagnostic (code
   `universe-turn`), located on the line of the statement it names when it names one.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kestrel.cli.errors import UsageError
from kestrel.lang import Diagnostic, LangError, parse

TURN_CODE = "universe-turn"


@dataclass(frozen=True)
class TurnUniverse:
    """The universe a file is checked against: its symbols in order and each one's lot."""

    symbols: tuple[str, ...]
    lots: Mapping[str, float]


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a universe turn (check each file as one reply of a universe session)")
    g.add_argument("--data", default=None, metavar="UNIVERSE",
                   help="a universe: a long-format file with a symbol column, a folder or a glob of per-symbol "
                        "files; its symbols and each one's lot (from --instruments) are what the plans may name")
    g.add_argument("--symbols", default=None, metavar="A,B,...",
                   help="with --data, check against these symbols of it; alone, the universe's symbols "
                        "(each with the lot --lot-size)")
    g.add_argument("--instruments", default=None, metavar="PATH",
                   help="with --data: the universe's symbols table (lot_size per symbol), as kestrel simulate")
    g.add_argument("--columns", default=None, metavar="ROLE=COL,...", help="with --data: map the file's columns")
    g.add_argument("--delimiter", default=None, metavar="SEP", help="with --data: the CSV delimiter (default ,)")
    g.add_argument("--blind", action="store_true",
                   help="with --data: check the reply a blind run's agent writes (its symbols the aliases SYM1, ...)")


def _symbols(text: str) -> list[str]:
    symbols = [s.strip() for s in text.split(",") if s.strip()]
    if not symbols:
        raise UsageError("--symbols is empty: give symbols like AAPL,MSFT")
    return symbols


def turn_universe(args: argparse.Namespace, lot: float | None) -> TurnUniverse | None:
    """The universe the flags name (None without `--data` or `--symbols`: a plain check);
    `UsageError` naming the fix on a bad flag or unreadable data."""
    if args.data is None:
        if args.instruments is not None or args.columns is not None or args.delimiter is not None or args.blind:
            raise UsageError("--instruments, --columns, --delimiter and --blind read a universe's file: give it "
                             "with --data")
        if args.symbols is None:
            return None
        symbols = tuple(s.upper() for s in _symbols(args.symbols))
        return TurnUniverse(symbols, {s: 1.0 if lot is None else lot for s in symbols})
    if lot is not None:
        raise UsageError("--lot-size is for a plain check or --symbols alone; with --data each symbol's lot is "
                         "its instrument's (--instruments): drop --lot-size")
    from kestrel.data import DataError
    from kestrel.data.universe import load_universe
    from kestrel.session.options import SessionError, SessionOptions
    from kestrel.session.portfolio_day import universe_configs

    path = args.data.strip()
    if not path:
        raise UsageError("--data is empty: give the universe's file, folder or glob")
    try:
        universe = load_universe(path, columns=args.columns,
                                 symbols=None if args.symbols is None else _symbols(args.symbols),
                                 instruments=args.instruments, delimiter=args.delimiter or ",").universe
        configs = universe_configs(universe, SessionOptions())
    except DataError as exc:
        raise UsageError(str(exc)) from None
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    lots = {s: float(c.lot_size) for s, c in configs.items()}
    if not args.blind:
        return TurnUniverse(tuple(universe.symbols), lots)
    from kestrel.session.blind import blind_of

    blind = blind_of(universe)  # the run's mapping: the agent names each symbol by its alias
    shown = blind.shown_order(list(universe.symbols))
    return TurnUniverse(tuple(blind.alias(s) for s in shown), {blind.alias(s): lots[s] for s in shown})


_NAMED = (re.compile(r"^plan (\S+)"), re.compile(r"^STANDDOWN ON (\S+)"), re.compile(r"^two plans ON (\S+)"))


def _line_of(text: str, message: str) -> int | None:
    """The line of the statement `message` names (`plan NAME ...`, `STANDDOWN ON SYM`, `two
    plans ON SYM`: its second plan), or None."""
    lines = text.splitlines()
    for kind, pattern in enumerate(_NAMED):
        m = pattern.match(message)
        if m is None:
            continue
        word = re.escape(m.group(1).rstrip(":"))
        want = (rf"^\s*PLAN\s+{word}\b", rf"^\s*STANDDOWN\s+ON\s+{word}\b", rf"^\s*PLAN\s+\S+\s+ON\s+{word}\b")[kind]
        hits = [i + 1 for i, ln in enumerate(lines) if re.match(want, ln, re.IGNORECASE)]
        if hits:
            return hits[-1] if kind == 2 else hits[0]
    return None


def check_turn(text: str, universe: TurnUniverse) -> list[Diagnostic]:
    """The problems of `text` as one reply of a turn over `universe` (the module docstring);
    empty when the run would accept it."""
    from kestrel.frame import DEFAULT_CATALOG, ViewError, resolve_view
    from kestrel.session.ports import TURN_LIMITS, interpret_module
    from kestrel.session.protocol import Invalid, RequestView

    symbols, lots = universe.symbols, universe.lots
    try:
        parse(text, TURN_LIMITS, lot=min(lots.values(), default=1.0), symbols=symbols)
    except LangError as err:
        return list(err.diagnostics)
    reply = interpret_module(text, symbols, lots)
    if isinstance(reply, Invalid):
        message = " ".join(reply.error.split())
        line = _line_of(text, message)
        return [Diagnostic(TURN_CODE, message, line, None if line is None else 1)]
    if isinstance(reply, RequestView) and reply.view is not None:
        try:
            resolve_view(reply.view, None, DEFAULT_CATALOG, symbols=symbols)
        except ViewError as exc:
            at = next((i + 1 for i, ln in enumerate(text.splitlines()) if re.match(r"^\s*VIEW\b", ln)), None)
            return [Diagnostic(TURN_CODE, f"VIEW {exc.view_name}: {p}", at, None if at is None else 1)
                    for p in exc.problems]
    return []


__all__ = ["TURN_CODE", "TurnUniverse", "add_flags", "check_turn", "turn_universe"]
