"""Bounds on what a Kestrel document may contain.

Every bound is checked before the work it protects: the document size before lexing, the
expression depth before any recursive walk, the others before the plan is accepted. With the
defaults a document parses and checks in bounded time and memory whatever its content.
"""

from __future__ import annotations

import msgspec

# The one range of a VIEW's `BUDGET` (tokens): the parser's check and the pane catalog's both
# read it from here (`Limits.min_budget/max_budget`, `kestrel.frame.catalog`).
VIEW_BUDGET_MIN = 64
VIEW_BUDGET_MAX = 4000


class Limits(msgspec.Struct, frozen=True):
    """Configurable bounds (all inclusive maxima). The defaults are safe for agent replies."""

    max_document_chars: int = 20_000
    max_statements: int = 16
    max_rules: int = 32
    max_actions: int = 4
    max_expr_depth: int = 24
    max_identifier_chars: int = 32
    max_string_chars: int = 200
    max_number: float = 1e9
    max_window_seconds: int = 5 * 86_400
    max_count: int = 10_000
    max_repeat: int = 100
    max_panes: int = 16
    max_pane_args: int = 8
    min_budget: int = VIEW_BUDGET_MIN
    max_budget: int = VIEW_BUDGET_MAX


DEFAULT_LIMITS = Limits()

RUN_MAX_WINDOW_SECONDS = 366 * 86_400
"""The longest window of a plan in a portfolio run that looks back over the run's sessions: a
year of sessions, `sma(last, 252, 1d)` or `high(20d)` on daily bars (a session's engine then
holds the run's earlier ticks; a single-symbol session keeps `max_window_seconds`, cut to its
own length)."""

RUN_LIMITS = Limits(max_window_seconds=RUN_MAX_WINDOW_SECONDS)
"""The default bounds with the window of a run that looks back over its sessions."""

__all__ = ["DEFAULT_LIMITS", "RUN_LIMITS", "RUN_MAX_WINDOW_SECONDS", "VIEW_BUDGET_MAX", "VIEW_BUDGET_MIN", "Limits"]
