"""The frame: frozen snapshots, the pane catalog, views and briefings (what the agent reads), of
one instrument (`freeze`, `briefing`) or of a universe (`freeze_universe`, `universe_briefing`).

The market model it reads (ticks, sessions, instruments, account state) lives in
`kestrel.market`.
"""

from kestrel.frame.catalog import DEFAULT_CATALOG, KERNEL_IDS, ArgSpec, PaneCatalog, PaneSpec
from kestrel.frame.ordinal import Ordinal
from kestrel.frame.snapshot import DEFAULT_GUARD_NS, FrozenSnapshot, freeze
from kestrel.frame.rules import pane_rules
from kestrel.frame.text import estimate_tokens
from kestrel.frame.typed import TypedSnapshot, TypedUniverse, typed_snapshot, typed_universe
from kestrel.frame.corporate import NO_EVENTS, CorporateEvents
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
from kestrel.frame.universe import UniverseSnapshot, freeze_universe
from kestrel.frame.universe_view import (
    default_universe_view,
    materialize_universe,
    resolve_universe_view,
    universe_briefing,
)

__all__ = [
    "NO_EVENTS",
    "CorporateEvents",
    "TypedUniverse",
    "UniverseSnapshot",
    "default_universe_view",
    "freeze_universe",
    "materialize_universe",
    "resolve_universe_view",
    "typed_universe",
    "universe_briefing",
    "DEFAULT_CATALOG",
    "DEFAULT_GUARD_NS",
    "KERNEL_IDS",
    "ArgSpec",
    "FrozenSnapshot",
    "Ordinal",
    "PaneCatalog",
    "PaneSpec",
    "ResolvedPane",
    "ResolvedView",
    "TypedSnapshot",
    "ViewError",
    "ViewSelection",
    "briefing",
    "default_view",
    "estimate_tokens",
    "freeze",
    "materialize",
    "pane_rules",
    "resolve_view",
    "typed_snapshot",
]
