"""`kestrel panes` (the pane catalog) and `kestrel view` (render a VIEW on a frozen snapshot)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.dataflags import add_data_flags, load_from_args, news_from_args, parse_date, parse_guard
from kestrel.cli.errors import UsageError
from kestrel.cli.execution import add_flags as add_execution_flags
from kestrel.cli.subcommands import Subcommands
from kestrel.cli.universe import add_universe_flags, is_universe
from kestrel.market.ticks import NS_PER_S

if TYPE_CHECKING:
    from kestrel.frame import FrozenSnapshot


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("panes", help="list the pane catalog (arguments, defaults, ranges)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(func=_panes)

    v = subparsers.add_parser(
        "view", help="render a VIEW against a frozen snapshot",
        description='Render a VIEW, e.g. kestrel view "VIEW scout: quote, bars(5m, 24) BUDGET 600".',
    )
    v.add_argument("view", help='a VIEW statement, e.g. "VIEW v: quote, bars(5m, 12)"')
    add_data_flags(v)
    v.add_argument("--date", default=None,
                   help="session date YYYY-MM-DD (default: as simulate, the last complete session, else "
                        "the most covered one)")
    v.add_argument("--at", default=None, help="ordinal time hh:mm on that session (default: open + 1h)")
    v.add_argument("--guard", default="5m",
                   help="freeze at the ordinal time minus this: seconds (300) or a duration (30s, 5m, 1h); default 5m")
    v.add_argument("--no-kernel", action="store_true", help="print the view only, without kernel panes")
    add_execution_flags(v)  # the operator's bounds and friction the RULES pane states
    add_universe_flags(v)  # --data UNIVERSE: the flags of kestrel simulate over a universe
    v.set_defaults(func=_view)


def _panes(args: argparse.Namespace) -> int:
    from kestrel.frame.catalog import DEFAULT_CATALOG as cat

    if args.json:
        doc = {
            "panes": cat.describe(),
            "kernel_ids": list(cat.kernel_ids),
            "budget": {"default": cat.default_budget, "min": cat.min_budget, "max": cat.max_budget},
        }
        sys.stdout.write(msgspec.json.encode(doc).decode() + "\n")
        return 0
    width = max(len(s.signature()) for s in cat)
    for s in cat:
        print(f"{s.signature().ljust(width)}  {s.description}")
    print()
    for s in cat:
        for a in s.args:
            print(f"{s.name}.{a.name}: {a.type} default {a.show(a.default)}, {a.range_text()} ({a.help})")
    print()
    print(f"kernel (reserved, always in the briefing): {', '.join(cat.kernel_ids)}")
    print(f"BUDGET {cat.min_budget}..{cat.max_budget} tokens, default {cat.default_budget}")
    return 0


def _fail(msg: str, code: int) -> int:
    print(f"kestrel view: {msg}", file=sys.stderr)
    return code


STALE_S = 30 * 60
"""`kestrel view` warns when the latest tick at or before the cutoff is older than this."""


def _stale(snap: FrozenSnapshot) -> str | None:
    """A warning when the snapshot's latest tick is far from its cutoff (`STALE_S`): the view
    then shows old prices under a recent cutoff."""
    t = snap.ticks
    cut = snap.clock(snap.cutoff_ns)
    if len(t) == 0:
        return f"no tick at or before the {cut} cutoff: the panes show no market"
    gap_s = (snap.cutoff_ns - int(t.ts[-1])) // NS_PER_S
    if gap_s <= STALE_S:
        return None
    hours, mins = divmod(gap_s // 60, 60)
    return (f"the latest tick at or before the {cut} cutoff is {snap.dated(int(t.ts[-1]))}, "
            f"{hours}h{mins:02d}m earlier: the panes show prices that old (choose another --date or --at)")


def _view(args: argparse.Namespace) -> int:
    from kestrel.cli.execution import engine_config
    from kestrel.frame import Ordinal, ViewError, briefing, freeze, materialize, resolve_view
    from kestrel.frame.ordinal import AtError, view_ordinal
    from kestrel.lang import LangError, View, parse
    from kestrel.session.coverage import coverage
    from kestrel.session.options import SessionError
    from kestrel.session.days import pick_sessions
    from kestrel.session.rules import terms_of

    try:
        guard_ns = parse_guard(args.guard) * NS_PER_S
        date = parse_date(args.date)
        terms = terms_of(engine_config(args, None))
    except UsageError as e:
        return _fail(str(e), 2)
    try:
        stmt = parse(args.view)
    except LangError as e:
        return _fail(f"invalid VIEW:\n{e}", 1)
    if not isinstance(stmt, View):
        return _fail(f"expected one VIEW statement, got {type(stmt).__name__}", 1)
    if is_universe(args):
        from kestrel.cli.universe_view import universe_view

        return universe_view(args, stmt)
    try:
        data, _, _ = load_from_args(args, "view")
        news, _ = news_from_args(args, "view")
    except UsageError as e:
        return _fail(str(e), 2)
    if not data.sessions:
        return _fail("the data has no session with ticks", 2)
    try:
        (session,) = pick_sessions(data, date, 1)
    except SessionError as e:
        return _fail(str(e), 2)
    if args.at is None:
        at_ns = session.open_ns + 3600 * NS_PER_S
        ordinal = Ordinal(1, "open+1h", at_ns)
    else:
        try:
            where = "the last session" if session == data.sessions[-1] else f"the session {session.date}"
            ordinal = view_ordinal(session, args.at, where=where)
        except AtError as e:
            return _fail(str(e), 2)
        at_ns = ordinal.time_ns
    try:
        resolved = resolve_view(stmt, ordinal)
    except ViewError as e:
        return _fail(str(e), 1)
    from kestrel.session.blind import blind_of

    snap = freeze(data, at_ns, guard_ns, terms=terms, news=news, blind=blind_of(data) if args.blind else None)
    cover = coverage(data, session)
    if not cover.complete:
        print(f"kestrel view: warning: {cover.describe()}", file=sys.stderr)
    stale = _stale(snap)
    if stale is not None:
        print(f"kestrel view: warning: {stale}", file=sys.stderr)
    if args.no_kernel:
        sys.stdout.write(materialize(resolved, snap) + "\n")
    else:
        sys.stdout.write(briefing(snap, ordinal, resolved))
    return 0


