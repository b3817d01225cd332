"""The language card: the system prompt that teaches Kestrel to a model, generated from the
language itself so it can never drift from what the runtime accepts.

Everything below is read from the live registries: the series and function signatures
(`kestrel.lang.registry`), the pane catalog with its argument defaults and ranges
(`kestrel.frame.DEFAULT_CATALOG`), the document bounds (`kestrel.lang.DEFAULT_LIMITS`) and the
reply grammar, rendered rule by rule from `kestrel/lang/kestrel.lark` (`kestrel.models.grammar`).
The tests check that every terminal an author can write is in the card and that every example
in it parses and checks.

Invariants:
- `language_card()` is a pure function: the same text for the same registries (byte-stable),
  so providers' prompt caches keep hitting (it is the first, stable part of every request);
- it never contains run-specific values (time, budgets left, market data): those arrive in the
  user messages (the briefing's BUDGET line);
- it stays within 1,500 o200k_base tokens (asserted by the tests; `bench/models.py` reports it).
This module is pure (no SDK, no I/O): the MCP server serves the same card as a resource.
"""

from __future__ import annotations

from functools import cache

from kestrel.frame import DEFAULT_CATALOG, ArgSpec, PaneCatalog
from kestrel.lang import DEFAULT_LIMITS, Limits
from kestrel.lang.registry import FUNCTIONS, SERIES
from kestrel.lang.signature import PARAMETER_KINDS
from kestrel.models.grammar import grammar_lines

STATEMENT_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "PLAN",
        "arm a bounded plan (replaces the incumbent plan)",
        "PLAN orb UNTIL 15:45 RISK maxpos 200 maxloss 400\n"
        "WHEN last > high(30m) AND spread < 0.05: BUY 100 LMT ask+0.02 STOP -0.6% TARGET +1.2% TTL 20m\n"
        "WHEN last < low(30m): SELL 100 MKT STOP +0.6% TARGET -1.2%",
    ),
    (
        "VIEW",
        "see more panes before deciding (costs an iteration)",
        "VIEW scout: quote, bars(5m, 24), levels BUDGET 600",
    ),
    ("STANDDOWN", "disarm entries and cancel working entry orders", 'STANDDOWN "spread too wide to trade"'),
    ("PASS", "keep the incumbent plan", "PASS"),
)
"""(statement, what it does, one short example): the four replies a model may give."""

REPLY_RULE = (
    "Reply with exactly one statement: PLAN, VIEW, STANDDOWN or PASS. No prose, markdown, "
    "code fences or comments."
)


def _grammar_lines(limits: Limits) -> list[str]:
    """The reply grammar generated from kestrel.lark, then what its placeholders mean (prose:
    semantics the grammar cannot say)."""
    return [
        "# Grammar (keywords are case-insensitive)",
        *grammar_lines(),
        "name: letters, digits, _. SYMBOL: a symbol (a universe: one plan ON each). "
        "n: a number; n%: a percent; dur: 30s 5m 2h 1d; hh:mm: a time; \"text\": a reason.",
        "A rule fires at the first tick its expr holds, then is spent; xN re-arms it "
        f"(N <= {limits.max_repeat}). RISK only tightens the operator's bounds.",
        "offset: -0.6% (of fill) | -0.50 (price) | @182.40 (absolute). "
        "BUY: STOP below (-), TARGET above (+); SELL: the reverse. TRAIL 0.5% is a distance.",
        "LMT/STP take a Price sum (ask+0.02). Qty: whole lots <= maxpos; size: money or % of equity.",
        "NOT binds tightest, then * /, + -, comparisons, AND, OR; both sides of a comparison "
        "share a type (Price Qty Money Pct Duration TimeOfDay Count Bool).",
    ]


def _registry_lines() -> list[str]:
    by_type: dict[str, list[str]] = {}
    for spec in SERIES.values():
        by_type.setdefault(spec.type, []).append(spec.name)
    series = "; ".join(f"{kind}: {' '.join(names)}" for kind, names in by_type.items())
    funcs = " ".join(f.signature for f in FUNCTIONS.values())
    kinds: dict[str, list[str]] = {}
    for name, kind in PARAMETER_KINDS.items():
        kinds.setdefault(kind, []).append(name)
    legend = " ".join(f"{','.join(names)}:{kind}" for kind, names in kinds.items())
    return [f"Series: {series}", f"Functions ({legend} of one type): {funcs}"]


def _range(a: ArgSpec) -> str:
    """An argument's range, compact: `1m..1d by 1m`, `1..100`, `one of a, b`."""
    if a.type == "duration" and a.step and not a.choices:
        lo = a.show(a.min) if a.min is not None else "-inf"
        hi = a.show(a.max) if a.max is not None else "inf"
        return f"{lo}..{hi}" if a.step == a.min else f"{lo}..{hi} by {a.show(a.step)}"
    return a.range_text()


def _pane_lines(catalog: PaneCatalog) -> list[str]:
    """One line per pane (`*`: it takes a leading symbol), the ranges of its duration and count
    arguments in their order; symbol and free-word arguments have no range to state."""
    lines = []
    for spec in catalog:
        ranges = "; ".join(_range(a) for a in spec.args if a.type in ("duration", "count"))
        star = " *" if spec.per_symbol else ""
        lines.append(f"{spec.signature()}:{star} {spec.description}" + (f" [{ranges}]" if ranges else ""))
    lines.append(
        f"BUDGET n: view tokens {catalog.min_budget}..{catalog.max_budget} (default "
        f"{catalog.default_budget}); kernel panes are not requestable."
    )
    return lines


PANES_HEAD = "# Panes (VIEW name: pane, pane(args) [BUDGET n]); *: symbol first, bars(AAPL, 1d, 20)"
"""The pane section's head: how a VIEW names panes and their symbol."""


RULES_LINES: tuple[str, ...] = (
    "# Rules",
    "Rejected: an order past maxpos or maxorders; one whose worst case at its stop (with costs) reaches "
    "maxloss or session_maxloss, which also disarms the plan. A loss reaching maxloss disarms and flattens; "
    "session_maxloss ends the session. PASS or an unchanged PLAN keeps the incumbent; rename it to re-arm.",
)
"""How the bounds bind and how a plan is kept or re-armed (the runtime's rules, stated once)."""


def _limit_line(limits: Limits) -> str:
    return (
        f"Limits: {limits.max_rules} rules, {limits.max_actions} actions/rule, names "
        f"{limits.max_identifier_chars} chars, reasons {limits.max_string_chars} chars, "
        f"{limits.max_panes} panes/VIEW, {limits.max_document_chars} chars/reply; windows within "
        "the session so far."
    )


def render_card(catalog: PaneCatalog = DEFAULT_CATALOG, limits: Limits = DEFAULT_LIMITS) -> str:
    """The card for a given catalog and limits (`language_card()` uses the defaults)."""
    parts: list[str] = [
        "You are a trading agent: you author bounded plans in Kestrel, the runtime fires them at the "
        "tick. Each user message is a briefing: kernel panes (CLOCK, RULES, BUDGET, REPLY), then a view.",
        "",
        REPLY_RULE,
        "",
        "# Statements",
    ]
    for name, what, example in STATEMENT_EXAMPLES:
        parts += [f"{name}: {what}", example, ""]
    parts += [*_grammar_lines(limits), "", *_registry_lines(), ""]
    parts += [PANES_HEAD, *_pane_lines(catalog), ""]
    parts += [*RULES_LINES, ""]
    parts += [
        "# Loop",
        "A VIEW or an invalid reply (returned with its error) costs an iteration and tokens; "
        "at zero BUDGET the ordinal stands down. Decide once you have seen enough.",
        _limit_line(limits),
    ]
    return "\n".join(parts).strip() + "\n"


@cache
def language_card() -> str:
    """The system prompt for model agents (stable: the same bytes for every call)."""
    return render_card()


__all__ = ["REPLY_RULE", "RULES_LINES", "STATEMENT_EXAMPLES", "language_card", "render_card"]
