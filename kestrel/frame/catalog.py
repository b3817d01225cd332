"""The pane catalog: one registry of panes, each with a typed argument schema.

Invariants:
- pane names are unique, lower-case identifiers, disjoint from the reserved kernel ids;
- every argument has a default inside its range, so a pane can always be requested bare;
- builders are pure functions of (snapshot, resolved args).
- a per-symbol pane's first argument is its `symbol` (type "symbol", default `self`): a
  leading word in a VIEW is the symbol (`quote(AAPL)`, `bars(AAPL, 1d, 20)`), and without one
  the other arguments keep their positions (`bars(5m, 12)`); in a one-symbol session it may be
  omitted and must name that symbol, in a universe it names a member;
- a pane with a `universe` builder reads the whole universe snapshot (`watchlist`,
  `portfolio`, `events`, `news`); in a one-symbol session its `builder` renders the same over
  the one instrument.
Duration arguments are held in seconds, counts as ints, identifiers and symbols as strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import msgspec

import kestrel.frame.panes as panes
import kestrel.frame.watchlist as watchlist
from kestrel.frame.events import pane_events, universe_events
from kestrel.frame.news import pane_news, universe_news
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import fmt_duration
from kestrel.lang.limits import VIEW_BUDGET_MAX, VIEW_BUDGET_MIN

if TYPE_CHECKING:
    from kestrel.frame.universe import UniverseSnapshot

ArgType = Literal["duration", "count", "ident", "symbol"]
ArgValue = int | str
Builder = Callable[[FrozenSnapshot, Mapping[str, ArgValue]], str]
UniverseBuilder = Callable[["UniverseSnapshot", Mapping[str, ArgValue]], str]
SELF = "self"
"""The symbol argument's default: the session's one instrument."""

# Rendered by the runtime into every briefing; never requestable in a VIEW.
KERNEL_IDS: tuple[str, ...] = ("clock", "ordinal", "cutoff", "rules", "budget", "grammar")

DEFAULT_BUDGET = 900
MIN_BUDGET = VIEW_BUDGET_MIN  # the one BUDGET range lives in kestrel.lang.limits
MAX_BUDGET = VIEW_BUDGET_MAX


class ArgSpec(msgspec.Struct, frozen=True):
    """One pane argument: `default`, `min`, `max` are seconds for durations, ints for counts.
    `step` (durations) requires a multiple of that many seconds; `choices` (idents)."""

    name: str
    type: ArgType
    default: ArgValue
    min: int | None = None
    max: int | None = None
    step: int | None = None
    choices: tuple[str, ...] = ()
    help: str = ""

    def show(self, value: ArgValue) -> str:
        if self.type == "duration" and isinstance(value, int):
            return fmt_duration(value)
        return str(value)

    def range_text(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.type == "ident":
            return "a word"
        if self.type == "symbol":
            return "a symbol of the session, first"
        lo = self.show(self.min) if self.min is not None else "-inf"
        hi = self.show(self.max) if self.max is not None else "inf"
        step = f", a multiple of {fmt_duration(self.step)}" if self.step else ""
        return f"{lo}..{hi}{step}"


@dataclass(frozen=True, slots=True)
class PaneSpec:
    """A requestable pane."""

    name: str
    description: str
    args: tuple[ArgSpec, ...]
    builder: Builder
    universe: UniverseBuilder | None = None
    header_lines: int | None = None
    """Set for a table in time order (oldest row first) under this many header lines: a budget
    cut keeps the header and the newest rows. Unset: a cut keeps the first lines."""

    @property
    def per_symbol(self) -> bool:
        """True when the pane shows one instrument, named by its leading `symbol` argument."""
        return bool(self.args) and self.args[0].type == "symbol"

    def signature(self) -> str:
        """`bars(tf=5m, n=12)`: the pane with its defaults, as a VIEW would write it (a per-symbol
        pane's optional leading symbol left out)."""
        shown = self.args[1:] if self.per_symbol else self.args
        if not shown:
            return self.name
        inner = ", ".join(f"{a.name}={a.show(a.default)}" for a in shown)
        return f"{self.name}({inner})"

    def arg(self, name: str) -> ArgSpec | None:
        for a in self.args:
            if a.name == name:
                return a
        return None


class PaneCatalog:
    """The registry of panes plus the reserved kernel ids and the view budget range."""

    def __init__(
        self,
        specs: Iterable[PaneSpec],
        kernel_ids: tuple[str, ...] = KERNEL_IDS,
        default_budget: int = DEFAULT_BUDGET,
        min_budget: int = MIN_BUDGET,
        max_budget: int = MAX_BUDGET,
    ) -> None:
        self._specs: dict[str, PaneSpec] = {}
        for s in specs:
            if s.name in self._specs:
                raise ValueError(f"duplicate pane {s.name!r} in catalog")
            if s.name in kernel_ids:
                raise ValueError(f"pane {s.name!r} collides with a reserved kernel id")
            self._specs[s.name] = s
        self.kernel_ids = kernel_ids
        if not min_budget <= default_budget <= max_budget:
            raise ValueError("default budget outside the budget range")
        self.default_budget = default_budget
        self.min_budget = min_budget
        self.max_budget = max_budget

    def __iter__(self) -> Iterator[PaneSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def get(self, name: str) -> PaneSpec | None:
        return self._specs.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def only(self, names: Iterable[str]) -> PaneCatalog:
        """The same catalog restricted to the panes in `names` (a mode's allowed panes; names
        it does not hold are ignored), keeping the kernel ids and the budget range."""
        keep = set(names)
        return PaneCatalog([s for s in self if s.name in keep], self.kernel_ids, self.default_budget,
                           self.min_budget, self.max_budget)

    def describe(self) -> list[dict[str, object]]:
        """Plain data for `kestrel panes --json` and the MCP server."""
        return [
            {
                "name": s.name,
                "description": s.description,
                "signature": s.signature(),
                "args": [
                    {
                        "name": a.name,
                        "type": a.type,
                        "default": a.show(a.default),
                        "range": a.range_text(),
                        "help": a.help,
                    }
                    for a in s.args
                ],
            }
            for s in self
        ]


def _dur(name: str, default: int, lo: int, hi: int, step: int, help: str) -> ArgSpec:
    return ArgSpec(name, "duration", default, min=lo, max=hi, step=step, help=help)


def _count(name: str, default: int, lo: int, hi: int, help: str) -> ArgSpec:
    return ArgSpec(name, "count", default, min=lo, max=hi, help=help)


SYMBOL = ArgSpec("symbol", "symbol", SELF, help="the instrument; optional in a one-symbol session")


DEFAULT_CATALOG = PaneCatalog(
    [
        PaneSpec("quote", "bid/ask, last, open, vwap, volume, change",
                 (SYMBOL,), panes.pane_quote),
        PaneSpec("bars", "OHLCV+VWAP bars (* forming)",
                 (SYMBOL, _dur("tf", 300, 60, 86_400, 60, "bar timeframe, 1m..1d"),
                  _count("n", 12, 1, 100, "number of bars")),
                 panes.pane_bars, header_lines=2),
        PaneSpec("levels", "prior H/L/C, overnight, today O/H/L, opening range",
                 (SYMBOL, _dur("or", 1800, 60, 14_400, 60, "opening range length"),),
                 panes.pane_levels),
        PaneSpec("stats", "ATR, realized vol, relative volume",
                 (SYMBOL, _dur("tf", 300, 60, 86_400, 60, "bar timeframe"),
                  _count("n", 14, 2, 100, "number of completed bars")),
                 panes.pane_stats),
        PaneSpec("tape", "last n ticks",
                 (SYMBOL, _count("n", 10, 1, 50, "number of ticks"),),
                 panes.pane_tape, header_lines=2),
        PaneSpec("position", "position, entry, PnL, fees, orders",
                 (SYMBOL,), panes.pane_position),
        PaneSpec("plan", "the incumbent plan",
                 (SYMBOL,), panes.pane_plan),
        PaneSpec("news", "dated headlines",
                 (_count("n", 5, 1, 20, "number of headlines"),
                  ArgSpec("symbol", "ident", "self", help="self (the session's symbol), all, or a symbol"),
                  _count("since", 5, 0, 60, "sessions back: items after that session's close (0: today)")),
                 pane_news, universe_news),
        PaneSpec("watchlist", "per symbol last, 1 and 5 session change, rvol, position",
                 (), watchlist.pane_watchlist, watchlist.universe_watchlist),
        PaneSpec("portfolio", "cash, equity, exposure, positions",
                 (_count("n", 20, 1, 100, "open positions listed, largest first"),),
                 watchlist.pane_portfolio, watchlist.universe_portfolio),
        PaneSpec("events", "splits and dividends",
                 (_count("n", 5, 1, 20, "number of events"),
                  ArgSpec("symbol", "ident", "self", help="self, all, or a symbol")),
                 pane_events, universe_events),
    ]
)
