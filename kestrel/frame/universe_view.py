"""Views over a frozen universe: the default view, resolution, materialization and the briefing.

A universe view names per-symbol panes with their symbol (`quote(AAPL)`, `bars(AAPL, 1d, 20)`;
each symbol a member, its alias in blind mode) and universe panes (`watchlist`, `portfolio`,
`events`, `news`); `universe_briefing` renders the kernel panes (CLOCK, RULES, BUDGET, REPLY)
then the view within its budget, as `briefing` does for one symbol. Invariants are the
single-symbol views' (`kestrel.frame.view`): resolution fails closed listing every problem,
materialization is a pure function of (view, snapshot) within the budget.
"""

from __future__ import annotations

from collections.abc import Mapping

from kestrel.frame.catalog import DEFAULT_CATALOG, PaneCatalog
from kestrel.frame.ordinal import Ordinal
from kestrel.frame.rules import pane_universe_rules
from kestrel.frame.universe import UniverseSnapshot
from kestrel.frame.view import (
    ResolvedPane,
    ResolvedView,
    ViewError,
    ViewSelection,
    clock_line,
    compose_briefing,
    render_panes,
    resolve_view,
)
from kestrel.lang.ast import Number, PaneArg, PaneRef, View

DEFAULT_UNIVERSE_BUDGET = 1200
"""The default universe view's budget (estimated tokens): a watchlist of 20 symbols, the
account and the events fit with room."""


# ------------------------------------------------------------------------------------------
# views over a universe


DEFAULT_PORTFOLIO_ROWS = 10
"""Open positions the default view lists (the watchlist gives every position's size)."""


def default_universe_view(ordinal: Ordinal | None = None, catalog: PaneCatalog = DEFAULT_CATALOG) -> ResolvedView:
    """The view shown when the agent asks for none: `watchlist, portfolio(10), events`, budget
    `DEFAULT_UNIVERSE_BUDGET` (only the panes `catalog` holds: a mode's restricted catalog)."""
    rows = PaneRef("portfolio", (PaneArg(Number(DEFAULT_PORTFOLIO_ROWS)),))
    panes = tuple(p for p in ("watchlist", rows, "events") if (p if isinstance(p, str) else p.name) in catalog)
    sel = ViewSelection(panes, name="default", budget=max(catalog.min_budget,
                                                         min(catalog.max_budget, DEFAULT_UNIVERSE_BUDGET)))
    return resolve_view(sel, ordinal, catalog)


def resolve_universe_view(view: View | ViewSelection, snapshot: UniverseSnapshot, ordinal: Ordinal | None = None,
                          catalog: PaneCatalog = DEFAULT_CATALOG) -> ResolvedView:
    """`resolve_view` over a universe: every per-symbol pane must name a member (`quote(AAPL)`;
    its alias in blind mode); raises `ViewError` listing every problem."""
    return resolve_view(view, ordinal, catalog, symbols=snapshot.shown_symbols)


def render_pane(pane: ResolvedPane, snapshot: UniverseSnapshot, catalog: PaneCatalog = DEFAULT_CATALOG) -> str:
    """One resolved pane over the universe: a universe pane reads it whole, a per-symbol pane its
    member, its header naming the member (a refusal line when it names none)."""
    spec = catalog.get(pane.name)
    if spec is None:
        raise ViewError("?", [f"pane {pane.name!r} is not in this catalog"])
    args = dict(pane.args)
    if spec.universe is not None:
        return spec.universe(snapshot, args)
    if spec.per_symbol:
        word = str(args.get("symbol", "self"))
        member = snapshot.member(word) if word != "self" else (
            snapshot.members[0] if len(snapshot.members) == 1 else None)
        if member is None:
            return (f"{pane.name.upper()} {word}: name a symbol of the universe "
                    f"({', '.join(snapshot.shown_symbols[:5])}{', ...' if len(snapshot.members) > 5 else ''})")
        return _named(spec.builder(member, args), member.symbol)
    return spec.builder(snapshot.clock, args)


def _named(text: str, symbol: str) -> str:
    """A member's pane with its header naming the member (`BARS AAPL 1d last 20`, `LEVELS AAPL`):
    a universe view holds one pane per member, told apart by that word."""
    head, sep, rest = text.partition("\n")
    name, _, tail = head.partition(" ")
    if tail.split(" ", 1)[0] == symbol:
        return text
    return f"{name} {symbol} {tail}".rstrip() + sep + rest


def materialize_universe(resolved: ResolvedView, snapshot: UniverseSnapshot,
                         catalog: PaneCatalog = DEFAULT_CATALOG) -> str:
    """The view's panes over the universe within its budget (`materialize`'s rules)."""
    return render_panes(resolved, [render_pane(p, snapshot, catalog) for p in resolved.panes], catalog)


def universe_briefing(
    snapshot: UniverseSnapshot,
    ordinal: Ordinal,
    view: ResolvedView | View | ViewSelection | None = None,
    extra_kernel: Mapping[str, str] | None = None,
    catalog: PaneCatalog = DEFAULT_CATALOG,
) -> str:
    """Kernel panes (CLOCK of the universe, its RULES, BUDGET and any other kernel text given in
    `extra_kernel`, REPLY) then the view (default: `default_universe_view`), composed as one
    symbol's briefing is (`kestrel.frame.view.compose_briefing`)."""
    return compose_briefing(
        clock_line(snapshot.clock, ordinal, f"{len(snapshot.members)} symbols"),
        lambda: pane_universe_rules(snapshot), view, extra_kernel, catalog,
        default=lambda: default_universe_view(ordinal, catalog),
        resolve=lambda v: resolve_universe_view(v, snapshot, ordinal, catalog),
        render=lambda r: materialize_universe(r, snapshot, catalog))


__all__ = [
    "DEFAULT_PORTFOLIO_ROWS",
    "DEFAULT_UNIVERSE_BUDGET",
    "default_universe_view",
    "materialize_universe",
    "render_pane",
    "resolve_universe_view",
    "universe_briefing",
]
