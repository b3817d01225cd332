"""The frame: market data model, frozen snapshots, the pane catalog, views and briefings."""

from kestrel.frame.account import AccountState, WorkingOrder
from kestrel.frame.bars import Bars, session_bars, time_bars
from kestrel.frame.catalog import DEFAULT_CATALOG, KERNEL_IDS, ArgSpec, PaneCatalog, PaneSpec
from kestrel.frame.market import Instrument, MarketData
from kestrel.frame.ordinal import Ordinal
from kestrel.frame.session import SessionSpec
from kestrel.frame.snapshot import DEFAULT_GUARD_NS, FrozenSnapshot, freeze
from kestrel.frame.text import estimate_tokens
from kestrel.frame.ticks import Ticks
from kestrel.frame.view import (
    ResolvedPane,
    ResolvedView,
    ViewError,
    ViewSelection,
    briefing,
    default_view,
    materialize,
    resolve_view,
)

__all__ = [
    "DEFAULT_CATALOG",
    "DEFAULT_GUARD_NS",
    "KERNEL_IDS",
    "AccountState",
    "ArgSpec",
    "Bars",
    "FrozenSnapshot",
    "Instrument",
    "MarketData",
    "Ordinal",
    "PaneCatalog",
    "PaneSpec",
    "ResolvedPane",
    "ResolvedView",
    "SessionSpec",
    "Ticks",
    "ViewError",
    "ViewSelection",
    "WorkingOrder",
    "briefing",
    "default_view",
    "estimate_tokens",
    "freeze",
    "materialize",
    "resolve_view",
    "session_bars",
    "time_bars",
]
