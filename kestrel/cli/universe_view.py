"""`kestrel view --data UNIVERSE`: a VIEW rendered over a frozen universe, as the briefing an
agent of a universe run reads at that ordinal.

The universe, its account and its schedule come from the flags of `kestrel simulate --data
UNIVERSE` (`--symbols`, `--instruments`, `--columns`, `--factors`, `--capital` and the portfolio
bounds, `--cadence`, `--blind`, `--news`, `--guard`, the execution flags). The ordinal is the
session's first (OPEN, or CLOSE at `--cadence close`) unless `--at hh:mm` names another; the
account is the run's at that ordinal's cutoff when the run starts on that session (`--date`,
default the universe's last session): the engine is opened on the session and run, with no plan,
to the cutoff, the universe frozen there by the day driver of a run
(`PortfolioDayDriver.frozen`) and the briefing rendered by the run's own ports
(`kestrel.session.ports.universe_ports`). Its BUDGET line is the ordinal's first ask of an
iterative agent (the whole view-request cap and token budget left). So the text is the run's:
the briefing a run's agent is first sent, when the VIEW asked is the default one
(`VIEW default: watchlist, portfolio(10), events BUDGET 1200`), and the view a run's agent
reads after asking this VIEW, up to its BUDGET line. A pane naming no member (a real symbol in
blind mode) or a per-symbol pane naming none is refused as a run refuses it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kestrel.cli.dataflags import news_from_args, parse_date, parse_guard
from kestrel.cli.errors import UsageError
from kestrel.lang import View


def _fail(msg: str, code: int) -> int:
    print(f"kestrel view: {msg}", file=sys.stderr)
    return code


def universe_view(args: argparse.Namespace, stmt: View) -> int:
    """Render `stmt` over the universe `args` name (the module docstring); 2 on a usage error
    (bad flags, data or date), 1 on a view the universe refuses."""
    try:
        return _render(args, stmt)
    except UsageError as exc:
        return _fail(str(exc), 2)


def _render(args: argparse.Namespace, stmt: View) -> int:
    from kestrel.cli.execution import engine_config
    from kestrel.cli.universe import load_source, source_of, universe_bounds
    from kestrel.engine.portfolio import PortfolioEngine
    from kestrel.frame import ViewError, materialize_universe, resolve_universe_view
    from kestrel.frame.ordinal import AtError, view_ordinal
    from kestrel.session.loop import Kernel, LoopSettings
    from kestrel.session.options import SessionError, SessionOptions
    from kestrel.session.portfolio import pick_universe_sessions
    from kestrel.session.portfolio_day import PortfolioDayDriver, session_ordinals, universe_configs
    from kestrel.session.ports import universe_ports
    from kestrel.session.blind import blind_of

    guard_s = parse_guard(args.guard)
    date = parse_date(args.date)
    engine = engine_config(args, None)
    symbols = None if args.symbols is None else [s.strip() for s in args.symbols.split(",") if s.strip()]
    if symbols is not None and not symbols:
        raise UsageError("--symbols is empty: give symbols like AAPL,MSFT")
    bounds = universe_bounds(args)
    universe = load_source(source_of(args), symbols, "view")
    news, _ = news_from_args(args, "view")
    try:
        options = SessionOptions(guard_s=guard_s, engine=engine, blind=args.blind, news=news,
                                 cadence=args.cadence or "open")
        (session,) = pick_universe_sessions(universe, date, 1)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    if args.at is None:
        ordinal = session_ordinals(session, options)[0]
    else:
        if options.cadence == "close":
            raise UsageError("--at names a checkpoint of the open cadence; at --cadence close the one ordinal is "
                             "CLOSE: drop --at")
        where = "the last session" if session == universe.sessions[-1] else f"the session {session.date}"
        try:
            ordinal = view_ordinal(session, args.at, where=where)
        except AtError as exc:
            raise UsageError(str(exc)) from None
    try:
        configs = universe_configs(universe, options)  # each symbol's lot, multiplier and scaled maxpos
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    blind = blind_of(universe) if options.blind else None
    driver = PortfolioDayDriver(universe, session, options, configs=configs, bounds=bounds, iterative=True,
                                blind=blind)
    cut = driver.cutoff(ordinal)
    book = PortfolioEngine(universe, configs, bounds)
    book.open_session(session)
    book.run(cut, options.engine_path)
    snap = driver.frozen(ordinal, cut, book.state())
    try:
        if args.no_kernel:
            resolved = resolve_universe_view(stmt, snap, ordinal, options.catalog)
            sys.stdout.write(materialize_universe(resolved, snap, options.catalog) + "\n")
            return 0
        ports = universe_ports(snap, ordinal, bounds=driver.risk_bounds, catalog=options.catalog,
                               allowed_panes=options.allowed_panes)
        chosen = ports.resolve_view(stmt)
    except ViewError as exc:  # one line: every problem, each naming its fix
        one_file = blind is None and Path(args.data.strip()).is_file()  # --symbol picks a member of a long file
        unnamed = one_file and any("name the symbol" in p for p in exc.problems)
        also = f"; or view one symbol of the data alone with --symbol {universe.symbols[0]}" if unnamed else ""
        return _fail(f"invalid VIEW {exc.view_name}: {'; '.join(exc.problems)}{also}", 1)
    settings = LoopSettings()
    kernel = Kernel(ordinal=ordinal.label, iteration=0, iterations_left=settings.view_request_cap,
                    tokens_left=settings.authoring_token_budget, iterative=True)
    sys.stdout.write(ports.briefing(chosen, kernel))
    return 0


__all__ = ["universe_view"]
