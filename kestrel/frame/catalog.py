"""The pane catalog: one registry of panes, each with a typed argument schema.

Invariants:
- pane names are unique, lower-case identifiers, disjoint from the reserved kernel ids;
- every argument has a default inside its range, so a pane can always be requested bare;
- builders are pure functions of (snapshot, resolved args).
Duration arguments are held in seconds, counts as ints, identifiers as strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import msgspec

import kestrel.frame.panes as panes
from kestrel.frame.news import pane_news
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import fmt_duration
from kestrel.lang.limits import VIEW_BUDGET_MAX, VIEW_BUDGET_MIN

ArgType = Literal["duration", "count", "ident"]
ArgValue = int | str
Builder = Callable[[FrozenSnapshot, Mapping[str, ArgValue]], str]

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

    def signature(self) -> str:
        """`bars(tf=5m, n=12)`: the pane with its defaults, as a VIEW would write it."""
        if not self.args:
            return self.name
        inner = ", ".join(f"{a.name}={a.show(a.default)}" for a in self.args)
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


DEFAULT_CATALOG = PaneCatalog(
    [
        PaneSpec("quote", "last quote and trade, open, vwap, volume, change vs prior close",
                 (), panes.pane_quote),
        PaneSpec("bars", "the last n OHLCV+VWAP bars of tf (the last may be forming)",
                 (_dur("tf", 300, 60, 86_400, 60, "bar timeframe, 1m..1d"),
                  _count("n", 12, 1, 100, "number of bars")),
                 panes.pane_bars),
        PaneSpec("levels", "prior day H/L/C, overnight range, today's O/H/L, opening range",
                 (_dur("or", 1800, 60, 14_400, 60, "opening range length"),),
                 panes.pane_levels),
        PaneSpec("stats", "ATR, realized vol and relative volume over n completed tf bars",
                 (_dur("tf", 300, 60, 86_400, 60, "bar timeframe"),
                  _count("n", 14, 2, 100, "number of completed bars")),
                 panes.pane_stats),
        PaneSpec("tape", "the last n ticks (time, bid, ask, last, size)",
                 (_count("n", 10, 1, 50, "number of ticks"),),
                 panes.pane_tape),
        PaneSpec("position", "position, entry, PnL, fees, working orders",
                 (), panes.pane_position),
        PaneSpec("plan", "the incumbent plan",
                 (), panes.pane_plan),
        PaneSpec("news", "the newest n headlines before the cutoff, dated",
                 (_count("n", 5, 1, 20, "number of headlines"),
                  ArgSpec("symbol", "ident", "self", help="self (the session's symbol), all, or a symbol"),
                  _count("since", 5, 0, 60, "sessions back: items after that session's close (0: today)")),
                 pane_news),
    ]
)
