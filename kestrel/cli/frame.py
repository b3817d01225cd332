"""`kestrel panes` (the pane catalog) and `kestrel view` (render a VIEW on a frozen snapshot)."""

from __future__ import annotations

import argparse
import math
import re
import sys

import msgspec

_DUR = re.compile(r"^(\d+)([smh])$")
_TOD = re.compile(r"^(\d{1,2}):(\d{2})$")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("panes", help="list the pane catalog (arguments, defaults, ranges)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(func=_panes)

    v = subparsers.add_parser(
        "view", help="render a VIEW against a frozen snapshot",
        description='Render a VIEW, e.g. kestrel view "VIEW scout: quote, bars(5m, 24) BUDGET 600".',
    )
    v.add_argument("view", help='a VIEW statement, e.g. "VIEW v: quote, bars(5m, 12)"')
    v.add_argument("--data", default="sample", help="'sample' (default) or a CSV/Parquet file")
    v.add_argument("--preset", default=None, help="loader preset for --data PATH (default: detected)")
    v.add_argument("--tick-size", type=_positive_float, default=None, metavar="T",
                   help="the instrument's tick size for --data PATH (default: inferred from the prices)")
    v.add_argument("--crossed", choices=("error", "drop", "keep"), default="error",
                   help="what to do with crossed quotes (ask < bid)")
    v.add_argument("--at", default=None, help="ordinal time hh:mm on the last session (default: open + 1h)")
    v.add_argument("--guard", default="5m", help="freeze at the ordinal time minus this (default 5m)")
    v.add_argument("--no-kernel", action="store_true", help="print the view only, without kernel panes")
    v.set_defaults(func=_view)


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number like 0.01, got {text!r}") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"expected a positive number like 0.01, got {text!r}")
    return x


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


def _view(args: argparse.Namespace) -> int:
    from kestrel.data import DataError, load, load_sample
    from kestrel.frame import Ordinal, ViewError, briefing, freeze, materialize, resolve_view
    from kestrel.frame.ticks import NS_PER_S
    from kestrel.lang import LangError, View, parse

    g = _DUR.match(args.guard.strip())
    if g is None:
        return _fail(f"--guard must be a duration like 5m, 30s or 1h, got {args.guard!r}", 2)
    guard_ns = int(g.group(1)) * {"s": 1, "m": 60, "h": 3600}[g.group(2)] * NS_PER_S
    try:
        stmt = parse(args.view)
    except LangError as e:
        return _fail(f"invalid VIEW:\n{e}", 1)
    if not isinstance(stmt, View):
        return _fail(f"expected one VIEW statement, got {type(stmt).__name__}", 1)
    try:
        if args.data == "sample":
            if args.tick_size is not None or args.preset is not None or args.crossed != "error":
                return _fail("--tick-size, --preset and --crossed apply to --data PATH, not to the sample", 2)
            data = load_sample()
        else:
            loaded = load(args.data, args.preset, crossed=args.crossed, tick_size=args.tick_size)
            data = loaded.data
            for note in loaded.report.notes():
                print(f"kestrel view: {note}", file=sys.stderr)
    except (DataError, OSError) as e:
        return _fail(str(e), 2)
    if not data.sessions:
        return _fail("the data has no session with ticks", 2)
    session = data.sessions[-1]
    if args.at is None:
        at_ns = session.open_ns + 3600 * NS_PER_S
        label = "open+1h"
    else:
        m = _TOD.match(args.at.strip())
        if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
            return _fail(f"--at must be a time hh:mm, got {args.at!r}", 2)
        at_ns = session.wall_clock_ns(int(m.group(1)), int(m.group(2)))
        label = args.at.strip()
    ordinal = Ordinal(0 if at_ns <= session.open_ns else 1, label, at_ns)
    try:
        resolved = resolve_view(stmt, ordinal)
    except ViewError as e:
        return _fail(str(e), 1)
    snap = freeze(data, at_ns, guard_ns)
    if args.no_kernel:
        sys.stdout.write(materialize(resolved, snap) + "\n")
    else:
        sys.stdout.write(briefing(snap, ordinal, resolved))
    return 0
