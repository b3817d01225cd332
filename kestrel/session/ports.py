"""The authoring loop's ports wired to the real language and frame for one frozen snapshot.

Everything here is a pure function of (snapshot, ordinal, catalog, allowed panes, bounds): the
briefing text, view resolution and the plan's risk assessment (the one classification the
self-check, the risk trigger and the bound check read: `kestrel.session.risk.assess`, with the
snapshot's quote, account and condition probe) all read the one frozen snapshot, so a re-ask
after a view request sees the SAME market.

`universe_ports` are the same ports over a frozen universe (`kestrel.frame.universe`): the
reply is read as a module (`interpret_module`: PLANs each ON its symbol, STANDDOWN [ON SYM],
PASS, or one VIEW), the briefing is `universe_briefing` (its RULES pane with the account's
bounds) in the view asked for, views resolve with `resolve_universe_view` (per-symbol panes
name a member), and each plan is assessed against its own symbol's snapshot, lot and bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import msgspec

from kestrel import lang
from kestrel.engine.orders import TickGrid
from kestrel.engine.plans import clock_base_ns
from kestrel.engine.vector import Columns
from kestrel.frame import DEFAULT_CATALOG, FrozenSnapshot, Ordinal, PaneCatalog, ResolvedView
from kestrel.market import SessionSpec
from kestrel.frame.view import ViewError
from kestrel.frame import briefing as frame_briefing
from kestrel.frame import resolve_view as frame_resolve_view
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast
from kestrel.session.loop import Kernel, LoopPorts
from kestrel.frame.blind import Blind
from kestrel.frame.universe import UniverseSnapshot
from kestrel.frame.universe_view import resolve_universe_view, universe_briefing
from kestrel.lang import GRAMMAR_SUMMARY
from kestrel.lang.errors import LangError
from kestrel.lang.limits import RUN_MAX_WINDOW_SECONDS
from kestrel.session.blind import turn_from_blind
from kestrel.session.normalize import NormalizedReply, normalize_reply
from kestrel.session.protocol import (
    Invalid,
    ModuleReply,
    PortfolioTurn,
    Reply,
    RequestView,
    Supersede,
    TurnReply,
    interpret_reply,
)
from kestrel.session.risk import Touch, RiskAssessment, RiskBounds, assess


def interpret(text: str, limits: lang.Limits | None = None, lot: float = 1.0) -> Reply:
    """The runtime's interpretation of raw agent text with the Kestrel language; quantities
    must be whole numbers of the instrument's `lot`."""
    return interpret_reply(text, parse=lambda body: lang.parse(body, limits, lot))


def session_limits(session: SessionSpec | None) -> lang.Limits:
    """The language bounds for plans authored in `session`: a window can look back at most
    to the session's open (the engine evaluates one session), so `high(1d)` in a 6.5 h equity
    session is an error the author can repair, never a rule that silently cannot fire."""
    base = lang.DEFAULT_LIMITS
    if session is None:
        return base
    span_s = session.length_ns // NS_PER_S
    return msgspec.structs.replace(base, max_window_seconds=min(base.max_window_seconds, span_s))


QUOTE_SERIES = ("last", "bid", "ask", "mid", "spread")
"""The series `probe` judges: the current quote (the rest depend on the session so far or the
account)."""


def last_price(snapshot: FrozenSnapshot) -> float | None:
    t = snapshot.ticks
    return float(t.last[-1]) if len(t) else None


def probe(snapshot: FrozenSnapshot, cond: ast.Expr) -> bool | None:
    """Whether `cond` already holds at the cutoff, for the conditions that can be judged from
    the quote and price windows alone (None = cannot tell). Values are the engine's own
    (`kestrel.engine.vector.Columns`): the quote is the snapshot's latest tick, a window reads
    the session's ticks so far and is undefined (None) until the session has run its length."""
    session = snapshot.session
    n = len(snapshot.ticks)
    if session is None or n == 0:
        return None
    half_ticks, base = TickGrid(snapshot.data.tick_size).half_ticks_per_point, clock_base_ns(session)
    quote = Columns(snapshot.ticks.slice(n - 1, n), session, 0, half_ticks, base)
    today = snapshot.session_ticks()
    windows = Columns(today, session, max(len(today) - 1, 0), half_ticks, base)

    def value(e: ast.Expr) -> float | None:
        if isinstance(e, ast.Number):
            return e.value
        if isinstance(e, ast.Series) and e.name in QUOTE_SERIES:
            return float(quote.column(e)[0])
        if isinstance(e, ast.Call) and e.name in ("high", "low") and len(today):
            v = float(windows.column(e)[-1])
            return None if math.isnan(v) else v
        return None

    def truth(e: ast.Expr) -> bool | None:
        if isinstance(e, ast.Compare):
            a, b = value(e.left), value(e.right)
            if a is None or b is None:
                return None
            ops = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
            return ops[e.op]
        if isinstance(e, ast.And):
            parts = [truth(x) for x in e.operands]
            if any(p is False for p in parts):
                return False
            return True if all(p is True for p in parts) else None
        if isinstance(e, ast.Or):
            parts = [truth(x) for x in e.operands]
            if any(p is True for p in parts):
                return True
            return False if all(p is False for p in parts) else None
        if isinstance(e, ast.Not):
            inner = truth(e.operand)
            return None if inner is None else not inner
        return None

    return truth(cond)


def snapshot_ports(
    snapshot: FrozenSnapshot,
    ordinal: Ordinal,
    *,
    catalog: PaneCatalog = DEFAULT_CATALOG,
    allowed_panes: Sequence[str] | None = None,
    bounds: RiskBounds = RiskBounds(),
    blind: Blind | None = None,
) -> LoopPorts:
    """Ports for one ordinal's loop, all reading `snapshot`. In blind mode a plan the agent
    writes is in the blind scale: it is mapped back to real values (`Blind.plan_from_blind`)
    before anything checks, assesses or arms it."""
    allowed = None if allowed_panes is None else tuple(allowed_panes)
    shown = catalog if allowed is None else catalog.only(allowed)  # the briefing's panes
    reference = last_price(snapshot)

    def resolve(view: ast.View) -> object:
        if allowed is not None:
            banned = [p.name for p in view.panes if p.name not in allowed and p.name in catalog]
            if banned:
                raise ViewError(
                    view.name,
                    [f"pane {banned[0]!r} is not allowed in this mode; "
                     f"allowed panes: {', '.join(allowed)}"],
                )
        return frame_resolve_view(view, ordinal, catalog)

    def render(view: object | None, kernel: Kernel) -> str:
        budget = (
            f"{kernel.iterations_left} view requests or repairs left, "
            f"{kernel.tokens_left} tokens left"
            if kernel.iterative
            else "single-shot: reply with one PLAN, STANDDOWN or PASS"
        )
        chosen = view if isinstance(view, ResolvedView) else None
        return frame_briefing(snapshot, ordinal, chosen, {"budget": budget}, shown)

    t = snapshot.ticks
    touch = Touch(float(t.bid[-1]), float(t.ask[-1])) if len(t) else None
    money = None if blind is None else blind.money[snapshot.data.symbol].value  # findings in the agent's scale

    def risk(plan: ast.Plan) -> RiskAssessment:
        return assess(plan, reference=reference, bounds=bounds, quote=touch, account=snapshot.account,
                      probe=lambda c: probe(snapshot, c), money=money)

    limits = session_limits(snapshot.session)

    def read(text: str) -> Reply:
        reply = interpret(text, limits, bounds.lot_size)
        if blind is not None and isinstance(reply, TurnReply) and isinstance(reply.turn, Supersede):
            real = blind.plan_from_blind(reply.turn.plan, snapshot.data.symbol)
            return msgspec.structs.replace(reply, turn=msgspec.structs.replace(reply.turn, plan=real))
        return reply

    return LoopPorts(
        interpret=read, resolve_view=resolve, briefing=render, assess=risk
    )


MAX_PLANS = 100  # plans in one turn of a universe (one per symbol)
TURN_LIMITS = lang.Limits(max_statements=MAX_PLANS + 1, max_document_chars=400_000,
                          max_window_seconds=RUN_MAX_WINDOW_SECONDS)
"""The language bounds of one reply over a universe: a plan per symbol and one more statement; a
window as long as a run looks back (`RUN_MAX_WINDOW_SECONDS`)."""


UNIVERSE_GRAMMAR = (GRAMMAR_SUMMARY.replace("One statement:", "PLANs, one per symbol, each ON it; or one VIEW:", 1)
                    .replace("PLAN name UNTIL", "PLAN name ON SYM UNTIL", 1)
                    .replace('STANDDOWN "why"', 'STANDDOWN [ON SYM] "why"', 1))
"""The REPLY kernel pane over a universe: the language's summary, its plans ON a symbol."""


def interpret_module(text: str, symbols: Sequence[str], lots: Mapping[str, float] | None = None,
                     limits: lang.Limits = TURN_LIMITS) -> Reply:
    """`text` as a reply over a universe of `symbols`: one VIEW (`RequestView`), or a module
    (`ModuleReply`): PLANs each ON a symbol (one per symbol; a plan without ON is an error
    naming the fix unless the universe has one symbol), each checked against its symbol's lot
    (`lots`, default 1), `STANDDOWN` (every symbol), `STANDDOWN ON SYM` and `PASS`; anything
    else is `Invalid` with a one-line error or the language's repair text."""
    body = text.strip()
    if not body:
        return Invalid("empty reply: answer with PLANs (each ON a symbol), STANDDOWN, PASS or one VIEW")
    lot_of = dict(lots or {})
    try:
        node = lang.parse(body, limits, lot=min(lot_of.values(), default=1.0), symbols=tuple(symbols))
    except LangError as exc:
        return Invalid(str(exc).strip() or "the reply does not parse")
    if isinstance(node, ast.View):
        return RequestView(view_text=body, reason=node.name, view=node)
    statements = node.statements if isinstance(node, ast.Module) else (node,)
    plans: list[ast.Plan] = []
    downs: list[str] = []
    seen: set[str] = set()
    all_down: str | None = None
    for st in statements:
        if isinstance(st, ast.Plan):
            sym = st.instrument
            if sym is None:
                if len(symbols) != 1:
                    return Invalid(f"plan {st.name} has no ON: in a universe each plan names its symbol, "
                                   f"e.g. PLAN {st.name} ON {symbols[0]}")
                sym = symbols[0]
                st = msgspec.structs.replace(st, instrument=sym)
            if sym not in symbols:
                return Invalid(f"plan {st.name} is ON {sym}: no symbol {sym} in this session "
                               f"(its symbols are {', '.join(symbols)})")
            if sym in seen:
                return Invalid(f"two plans ON {sym}: one plan per symbol")
            diags = lang.check(st, limits, lot=lot_of.get(sym, 1.0), symbols=tuple(symbols))
            if diags:
                return Invalid(f"plan {st.name} ON {sym}: {diags[0].message}")
            seen.add(sym)
            plans.append(st)
        elif isinstance(st, ast.StandDown):
            if st.instrument is None:
                all_down = st.reason or "stand down requested by the agent"
            elif st.instrument not in symbols:
                return Invalid(f"STANDDOWN ON {st.instrument}: no symbol {st.instrument} in this session "
                               f"(its symbols are {', '.join(symbols)})")
            else:
                downs.append(st.instrument)
        elif isinstance(st, ast.Pass):
            continue
        else:
            return Invalid("a VIEW goes alone in its reply: send the VIEW, then PLANs, STANDDOWN or PASS "
                           "once its panes are in the briefing")
    if len(plans) > MAX_PLANS:
        return Invalid(f"{len(plans)} plans: at most {MAX_PLANS} in one reply")
    return ModuleReply(PortfolioTurn(tuple(plans), tuple(downs), all_down))


def normalize_module(text: str) -> NormalizedReply:
    """`normalize_reply` for a reply that may hold several statements (a module): `<think>`
    blocks and fences are stripped as for one statement, and prose around one statement too;
    a reply of several statements keeps its lines (prose among them is the parser's to
    report)."""
    norm = normalize_reply(text)
    if norm.error is None:
        return norm
    return normalize_reply(text, is_statement=lambda block: False)


def _touch(snapshot: FrozenSnapshot) -> Touch | None:
    t = snapshot.ticks
    return Touch(float(t.bid[-1]), float(t.ask[-1])) if len(t) else None


def _budget_text(kernel: Kernel, single: str) -> str:
    if not kernel.iterative:
        return f"single-shot: reply with {single}"
    return f"{kernel.iterations_left} view requests or repairs left, {kernel.tokens_left} tokens left"


def universe_ports(
    snapshot: UniverseSnapshot,
    ordinal: Ordinal,
    *,
    bounds: Mapping[str, RiskBounds],
    catalog: PaneCatalog = DEFAULT_CATALOG,
    allowed_panes: Sequence[str] | None = None,
    default_text: Callable[[], str] | None = None,
) -> LoopPorts:
    """Ports for one ordinal's loop over a universe, all reading `snapshot` (see the module
    docstring). `bounds` are each symbol's operator bounds (its lot, multiplier, tick and
    maxpos: what its plan is checked and assessed against). `default_text`, when given, renders
    the default view's text instead of the frame's default universe view (its BUDGET line
    appended); a view asked for is the frame's either way."""
    allowed = None if allowed_panes is None else tuple(allowed_panes)
    shown = catalog if allowed is None else catalog.only(allowed)
    symbols, shown_symbols, blind = snapshot.symbols, snapshot.shown_symbols, snapshot.blind
    lots = {w: float(bounds[s].lot_size) if s in bounds else 1.0 for s, w in zip(symbols, shown_symbols)}
    members = dict(zip(symbols, snapshot.members))

    def read(text: str) -> Reply:
        """The reply over the symbols the agent reads (aliases in blind mode), mapped back to
        real symbols and values (`turn_from_blind`) before anything checks or arms it."""
        reply = interpret_module(text, shown_symbols, lots)
        if blind is not None and isinstance(reply, ModuleReply):
            return ModuleReply(turn_from_blind(blind, reply.turn))
        return reply

    def resolve(view: ast.View) -> object:
        if allowed is not None:
            banned = [p.name for p in view.panes if p.name not in allowed and p.name in catalog]
            if banned:
                raise ViewError(view.name, [f"pane {banned[0]!r} is not allowed in this mode; "
                                            f"allowed panes: {', '.join(allowed)}"])
        return resolve_universe_view(view, snapshot, ordinal, catalog)

    def render(view: object | None, kernel: Kernel) -> str:
        budget = _budget_text(kernel, "PLANs each ON a symbol, STANDDOWN or PASS")
        chosen = view if isinstance(view, ResolvedView) else None
        if chosen is None and default_text is not None:
            return f"{default_text()}\nBUDGET {budget}"
        return universe_briefing(snapshot, ordinal, chosen, {"budget": budget, "grammar": UNIVERSE_GRAMMAR}, shown)

    def risk(plan: ast.Plan) -> RiskAssessment:
        sym = plan.instrument or symbols[0]
        m = members[sym]
        return assess(plan, reference=last_price(m), bounds=bounds.get(sym, RiskBounds()), quote=_touch(m),
                      account=m.account, probe=lambda c: probe(m, c),
                      money=None if blind is None else blind.money[sym].value)

    return LoopPorts(interpret=read, resolve_view=resolve,
                     briefing=render, assess=risk, normalize=normalize_module)


__all__ = ["MAX_PLANS", "TURN_LIMITS", "UNIVERSE_GRAMMAR", "interpret", "interpret_module", "last_price", "normalize_module", "probe", "session_limits",
           "snapshot_ports", "universe_ports"]
