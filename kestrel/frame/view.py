"""Views: resolving a VIEW against the catalog, materializing it within a token budget, and
the briefing (kernel panes + view) the agent reads at an ordinal.

Invariants:
- `resolve_view` fails closed: every problem (unknown pane, reserved kernel id, unknown,
  repeated, ill-typed or out-of-range argument, duplicate pane, budget out of range) raises a
  `ViewError` listing all problems with a fix for each; nothing is silently dropped;
- `materialize` is a pure function of (resolved view, snapshot): byte-identical output for
  the same inputs; its estimated tokens never exceed the view's budget; when panes do not fit,
  the cut is announced by an explicit `[budget ...]` marker line;
- the frame works from AST values (`kestrel.lang.ast.View`), never from text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import msgspec

from kestrel.frame.catalog import DEFAULT_CATALOG, SELF, ArgSpec, ArgValue, PaneCatalog, PaneSpec
from kestrel.frame.ordinal import Ordinal
from kestrel.frame.rules import pane_rules
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import estimate_tokens
from kestrel.lang import GRAMMAR_SUMMARY
from kestrel.market.ticks import NS_PER_S
from kestrel.lang.ast import Duration, Ident, Number, PaneArg, PaneArgValue, PaneRef, View
from kestrel.lang.formatter import expr as format_expr
from kestrel.lang.suggest import closest


class ViewError(ValueError):
    """An invalid view; `problems` holds one repair hint per problem."""

    def __init__(self, view_name: str, problems: list[str]) -> None:
        self.view_name = view_name
        self.problems = tuple(problems)
        n = len(problems)
        head = f"invalid VIEW {view_name}: {n} problem{'s' if n != 1 else ''}"
        super().__init__("\n".join([head] + [f"- {p}" for p in problems]))


class ViewSelection(msgspec.Struct, frozen=True):
    """A view built in code rather than parsed: panes by bare name or as `PaneRef`s."""

    panes: tuple[str | PaneRef, ...]
    name: str = "custom"
    budget: int | None = None


class ResolvedPane(msgspec.Struct, frozen=True):
    """A validated pane request with every argument filled in (defaults included)."""

    name: str
    args: tuple[tuple[str, ArgValue], ...] = ()

    def call(self, catalog: PaneCatalog = DEFAULT_CATALOG) -> str:
        """`bars(tf=5m, n=12)`, `bars(AAPL, tf=1d, n=20)` (a per-symbol pane's symbol leads, left
        out when it is the default `self`)."""
        spec = catalog.get(self.name)
        shown = []
        for k, v in self.args:
            a = spec.arg(k) if spec is not None else None
            if a is not None and a.type == "symbol":
                if v != SELF:
                    shown.append(str(v))
                continue
            shown.append(f"{k}={a.show(v) if a is not None else v}")
        return f"{self.name}({', '.join(shown)})" if shown else self.name


class ResolvedView(msgspec.Struct, frozen=True):
    """A validated view: panes in request order and a token budget."""

    name: str
    panes: tuple[ResolvedPane, ...]
    budget: int


# ------------------------------------------------------------------------------------------
# resolution


def _show_value(v: PaneArgValue) -> str:
    """The argument as the VIEW would write it (the language's formatter)."""
    return v.name if isinstance(v, Ident) else format_expr(v)


def _coerce(pane: str, spec: ArgSpec, v: PaneArgValue) -> ArgValue | str:
    """The argument's value, or an error string (prefixed with '!')."""
    where = f"{pane}: argument {spec.name}"
    got = _show_value(v)
    if spec.type == "duration":
        if not isinstance(v, Duration):
            return f"!{where} expects a duration like {spec.show(spec.default)}, got {got}"
        value = v.seconds
        if v.unit == "d" and v.value != 1:
            return f"!{where}: only 1d is allowed for days, got {got}"
    elif spec.type == "count":
        if not isinstance(v, Number) or not math.isfinite(v.value) or v.value != int(v.value):
            return f"!{where} expects a whole number like {spec.default}, got {got}"
        value = int(v.value)
    elif spec.type == "symbol":
        if not isinstance(v, Ident):
            return f"!{where} expects a symbol like AAPL, got {got}"
        return v.name
    else:
        if not isinstance(v, Ident):
            return f"!{where} expects a word ({spec.range_text()}), got {got}"
        if spec.choices and v.name not in spec.choices:
            return f"!{where} must be {spec.range_text()}, got {got}"
        return v.name
    lo, hi = spec.min, spec.max
    if (lo is not None and value < lo) or (hi is not None and value > hi) or (
        spec.step and value % spec.step
    ):
        return f"!{where} out of range: got {got}, allowed {spec.range_text()}"
    return value


def _did_you_mean(name: str, options: tuple[str, ...]) -> str:
    close = closest(name, options)
    return f" (did you mean {close!r}?)" if close is not None else ""


def _symbol_problem(ref: PaneRef, spec: PaneSpec, word: str, symbols: tuple[str, ...]) -> str | None:
    """Why `word` names no instrument of a session trading `symbols`; None when it does."""
    upper = {s.upper(): s for s in symbols}
    if word == SELF:
        if len(symbols) == 1:
            return None
        return (f"{ref.name}: name the symbol in a universe session: {ref.name}({symbols[0]}"
                f"{', ...' if spec.args[1:] else ''})")
    if word.upper() in upper:
        return None
    shown = ", ".join(symbols[:8]) + (", ..." if len(symbols) > 8 else "")
    return (f"{ref.name}: no symbol {word!r} in this session{_did_you_mean(word.upper(), tuple(upper))}; "
            f"symbols: {shown}")


def _leading_symbol(ref: PaneRef, spec: PaneSpec) -> bool:
    """True when the request's first argument is the per-symbol pane's symbol (a leading word)."""
    return spec.per_symbol and bool(ref.args) and ref.args[0].name is None and isinstance(ref.args[0].value, Ident)


def _resolve_pane(ref: PaneRef, spec: PaneSpec, problems: list[str],
                  symbols: tuple[str, ...] | None = None) -> ResolvedPane:
    values: dict[str, ArgValue] = {}
    seen_named = False
    names = tuple(a.name for a in spec.args)
    # a per-symbol pane's symbol is optional: without a leading word the others keep their places
    slots = spec.args if not spec.per_symbol or _leading_symbol(ref, spec) else spec.args[1:]
    for pos, arg in enumerate(ref.args):
        if arg.name is None:
            if seen_named:
                problems.append(f"{ref.name}: positional argument {_show_value(arg.value)} after a named one; "
                                f"write positional arguments first: {spec.signature()}")
                continue
            if pos >= len(slots):
                problems.append(f"{ref.name}: too many arguments ({len(ref.args)}), it takes "
                                f"{len(slots)}: {spec.signature()}")
                continue
            a = slots[pos]
        else:
            seen_named = True
            found = spec.arg(arg.name)
            if found is None:
                takes = ", ".join(names) if names else "no arguments"
                problems.append(f"{ref.name}: unknown argument {arg.name!r}{_did_you_mean(arg.name, names)}; "
                                f"it takes {takes}: {spec.signature()}")
                continue
            a = found
        if a.name in values:
            problems.append(f"{ref.name}: argument {a.name} given twice")
            continue
        got = _coerce(ref.name, a, arg.value)
        if isinstance(got, str) and got.startswith("!"):
            problems.append(got[1:])
            continue
        values[a.name] = got
    if spec.per_symbol and symbols is not None:
        why = _symbol_problem(ref, spec, str(values.get("symbol", SELF)), symbols)
        if why is not None:
            problems.append(why)
    # a per-symbol pane's default symbol is left out: a one-symbol view resolves as it always did
    return ResolvedPane(ref.name, tuple((a.name, values.get(a.name, a.default)) for a in spec.args
                                        if not (a.type == "symbol" and values.get(a.name, SELF) == SELF)))


def resolve_view(
    view: View | ViewSelection,
    ordinal: Ordinal | None = None,
    catalog: PaneCatalog = DEFAULT_CATALOG,
    *,
    symbols: tuple[str, ...] | None = None,
) -> ResolvedView:
    """Validate `view` against `catalog`; raise `ViewError` listing every problem. `symbols`
    (the session's, as the agent reads them) makes a per-symbol pane's symbol part of the check:
    it must name one of them (and is required when there are several); without it the pane
    itself refuses a symbol that is not its snapshot's."""
    problems: list[str] = []
    refs = [PaneRef(p) if isinstance(p, str) else p for p in view.panes]
    if not refs:
        problems.append(f"no panes requested; choose from: {', '.join(catalog.names())}")
    resolved: list[ResolvedPane] = []
    seen: set[tuple[str, str]] = set()
    for ref in refs:
        if ref.name in catalog.kernel_ids:
            problems.append(f"{ref.name!r} is a reserved kernel pane, already in every briefing; "
                            f"remove it from the VIEW")
            continue
        spec = catalog.get(ref.name)
        if spec is None:
            problems.append(f"unknown pane {ref.name!r}{_did_you_mean(ref.name, catalog.names())}; "
                            f"panes: {', '.join(s.signature() for s in catalog)}")
            continue
        pane = _resolve_pane(ref, spec, problems, symbols)
        key = (ref.name, str(dict(pane.args).get("symbol", SELF)).upper() if spec.per_symbol else "")
        if key in seen:
            what = f"{ref.name}({key[1]})" if spec.per_symbol and key[1] != SELF.upper() else repr(ref.name)
            problems.append(f"duplicate pane {what}: request each pane once")
            continue
        seen.add(key)
        resolved.append(pane)
    budget = catalog.default_budget if view.budget is None else view.budget
    if not catalog.min_budget <= budget <= catalog.max_budget:
        problems.append(f"BUDGET {budget} out of range: use {catalog.min_budget}..{catalog.max_budget} "
                        f"tokens (default {catalog.default_budget})")
    if problems:
        raise ViewError(view.name, problems)
    return ResolvedView(view.name, tuple(resolved), budget)


def default_view(ordinal: Ordinal | None = None, catalog: PaneCatalog = DEFAULT_CATALOG) -> ResolvedView:
    """The view shown when the agent asks for none. At OPEN (index 0) the bars are the prior
    session's 30m shape; later ordinals show the last hour of 5m bars. Only panes `catalog`
    holds are shown (a mode's restricted catalog)."""
    at_open = ordinal is not None and ordinal.index == 0
    bars = PaneRef("bars", (PaneArg(Duration(30, "m")), PaneArg(Number(13)))) if at_open else PaneRef(
        "bars", (PaneArg(Duration(5, "m")), PaneArg(Number(12)))
    )
    panes = ("quote", "levels", bars, "stats", PaneRef("tape", (PaneArg(Number(5)),)), "position", "plan")
    # a restricted catalog (a mode's allowed panes) shows only the panes it holds
    sel = ViewSelection(
        tuple(p for p in panes if (p if isinstance(p, str) else p.name) in catalog), name="default"
    )
    return resolve_view(sel, ordinal, catalog)


# ------------------------------------------------------------------------------------------
# materialization


def _render(pane: ResolvedPane, snapshot: FrozenSnapshot, catalog: PaneCatalog) -> str:
    spec = catalog.get(pane.name)
    if spec is None:
        raise ViewError("?", [f"pane {pane.name!r} is not in this catalog"])
    args = dict(pane.args)
    if spec.per_symbol:
        word = str(args.get("symbol", SELF))
        if word != SELF and snapshot.real_symbol(word) is None:
            return f"{pane.name.upper()} {word}: no such symbol here; this session trades {snapshot.symbol}"
    return spec.builder(snapshot, args)


def _marker(budget: int, cut: str | None, kept: int, total: int, omitted: list[str], newest: bool) -> str:
    parts = []
    if cut is not None:
        parts.append(f"{cut} cut to {kept}/{total} lines{', oldest rows dropped' if newest else ''}")
    if omitted:
        parts.append("omitted " + ", ".join(omitted))
    return f"[budget {budget} reached: {'; '.join(parts)}]"


def materialize(
    resolved: ResolvedView, snapshot: FrozenSnapshot, catalog: PaneCatalog = DEFAULT_CATALOG
) -> str:
    """Render the panes in order, separated by blank lines, within `resolved.budget` tokens
    (estimated with `estimate_tokens`). If they do not all fit, the pane that overflows keeps
    as many whole lines as fit (a table in time order its header and newest rows, see
    `PaneSpec.header_lines`) and a final marker names it and every omitted pane."""
    return render_panes(resolved, [_render(p, snapshot, catalog) for p in resolved.panes], catalog)


def _fit(lines: list[str], room: int, header_lines: int | None) -> list[str]:
    """The lines of a pane kept within `room` tokens: the first that fit, or, for a table in
    time order, its `header_lines` (all or none) and then as many of its last rows as fit, in
    their order. Each line after the first costs one more token, its newline."""
    head = lines if header_lines is None else lines[:header_lines]
    kept: list[str] = []
    spent = 0
    for line in head:
        c = estimate_tokens(line) + (1 if kept else 0)
        if spent + c > room:
            return kept if header_lines is None else []
        kept.append(line)
        spent += c
    rows: list[str] = []
    for line in reversed(lines[len(head):]):
        c = estimate_tokens(line) + (1 if kept or rows else 0)
        if spent + c > room:
            break
        rows.append(line)
        spent += c
    return kept + rows[::-1]


def render_panes(resolved: ResolvedView, texts: list[str], catalog: PaneCatalog = DEFAULT_CATALOG) -> str:
    """The rendered `texts` of `resolved.panes` laid out within the view's budget (see
    `materialize`)."""
    budget = resolved.budget
    whole = "\n\n".join(texts)
    if estimate_tokens(whole) <= budget:
        return whole
    names = [p.name for p in resolved.panes]
    longest = max(names, key=len)
    reserve = estimate_tokens("\n" + _marker(budget, longest, 999, 999, names, True))
    room = budget - reserve
    out: list[str] = []
    used = 0
    for i, text in enumerate(texts):
        sep = 2 if out else 0
        cost = estimate_tokens(text) + sep
        if used + cost <= room:
            out.append(text)
            used += cost
            continue
        lines = text.split("\n")
        spec = catalog.get(names[i])
        header_lines = None if spec is None else spec.header_lines
        kept = _fit(lines, room - used - sep, header_lines)
        if kept:
            out.append("\n".join(kept))
            newest = header_lines is not None and header_lines < len(kept) < len(lines)
            marker = _marker(budget, names[i], len(kept), len(lines), names[i + 1 :], newest)
        else:
            marker = _marker(budget, None, 0, 0, names[i:], False)
        return "\n\n".join(out) + ("\n" if out else "") + marker
    return "\n\n".join(out)


# ------------------------------------------------------------------------------------------
# briefing


def clock_line(snapshot: FrozenSnapshot, ordinal: Ordinal, who: str | None = None) -> str:
    """The CLOCK kernel pane: `who` (default the snapshot's symbol; a universe says how many
    symbols), the ordinal, the cutoff (dated when not on the ordinal's wall-clock date), the
    session and the time left to its close."""
    s = snapshot.session
    sess = (
        f" session {snapshot.session_label()} {s.open.strftime('%H:%M')}-{s.close.strftime('%H:%M')} {s.tz}"
        if s is not None
        else " session none"
    )
    left = ""
    if s is not None:
        mins = max(0, (s.close_ns - snapshot.time_ns) // (60 * NS_PER_S))
        span = (f"{mins // 60}h" if mins >= 60 else "") + (f"{mins % 60}m" if mins % 60 or mins < 60 else "")
        left = f"; now {snapshot.clock(snapshot.time_ns)[:5]}, close in {span}"
    return (
        f"CLOCK {snapshot.symbol if who is None else who} #{ordinal.index} {ordinal.label} "
        f"cutoff {snapshot.day_clock(snapshot.cutoff_ns)}{sess}{left}"
    )


def compose_briefing(
    clock: str,
    rules: Callable[[], str],
    view: ResolvedView | View | ViewSelection | None,
    extra_kernel: Mapping[str, str] | None,
    catalog: PaneCatalog,
    *,
    default: Callable[[], ResolvedView],
    resolve: Callable[[View | ViewSelection], ResolvedView],
    render: Callable[[ResolvedView], str],
) -> str:
    """A briefing, for one symbol or a universe: the kernel panes (CLOCK, RULES, each other
    kernel text of `extra_kernel` keyed by kernel id, REPLY: the grammar, `extra_kernel`'s or
    the language's summary) then the view (`default()` when None, `resolve`d unless already
    resolved) rendered by `render` under its `VIEW name budget` head. An unknown kernel key
    is a ValueError."""
    extra = dict(extra_kernel or {})
    unknown = sorted(k for k in extra if k not in catalog.kernel_ids)
    if unknown:
        raise ValueError(f"extra_kernel keys must be kernel ids {catalog.kernel_ids}, got {unknown}")
    lines = [extra.pop("clock", None) or clock]
    lines.append(extra.pop("rules", "") or rules())
    for k in catalog.kernel_ids:
        if k in extra and k != "grammar":
            lines.append(f"{k.upper()} {extra[k]}")
    lines.append(f"REPLY {(extra.get('grammar') or GRAMMAR_SUMMARY).strip()}")
    if view is None:
        resolved = default()
    elif isinstance(view, ResolvedView):
        resolved = view
    else:
        resolved = resolve(view)
    head = f"VIEW {resolved.name} budget {resolved.budget}"
    return "\n".join(lines) + "\n\n" + head + "\n" + render(resolved) + "\n"


def briefing(
    snapshot: FrozenSnapshot,
    ordinal: Ordinal,
    view: ResolvedView | View | ViewSelection | None = None,
    extra_kernel: Mapping[str, str] | None = None,
    catalog: PaneCatalog = DEFAULT_CATALOG,
) -> str:
    """Kernel panes (CLOCK with now, cutoff and close; RULES, the rules of the game:
    `kestrel.frame.rules`; BUDGET and any other kernel text the runtime passes in
    `extra_kernel`, keyed by kernel id; REPLY grammar summary) then the view."""
    return compose_briefing(
        clock_line(snapshot, ordinal), lambda: pane_rules(snapshot), view, extra_kernel, catalog,
        default=lambda: default_view(ordinal, catalog),
        resolve=lambda v: resolve_view(v, ordinal, catalog, symbols=(snapshot.symbol,)),
        render=lambda r: materialize(r, snapshot, catalog))


__all__ = [
    "ResolvedPane",
    "ResolvedView",
    "ViewError",
    "ViewSelection",
    "briefing",
    "clock_line",
    "compose_briefing",
    "default_view",
    "materialize",
    "render_panes",
    "resolve_view",
]
