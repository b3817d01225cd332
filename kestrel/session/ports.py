"""The authoring loop's ports wired to the real language and frame for one frozen snapshot.

Everything here is a pure function of (snapshot, ordinal, catalog, allowed panes, bounds): the
briefing text, view resolution and the plan's risk assessment (the one classification the
self-check, the risk trigger and the bound check read: `kestrel.session.risk.assess`, with the
snapshot's quote, account and condition probe) all read the one frozen snapshot, so a re-ask
after a view request sees the SAME market.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
from kestrel.session.protocol import Reply, Supersede, TurnReply, interpret_reply
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
    units, base = TickGrid(snapshot.data.tick_size).units, clock_base_ns(session)
    quote = Columns(snapshot.ticks.slice(n - 1, n), session, 0, units, base)
    today = snapshot.session_ticks()
    windows = Columns(today, session, max(len(today) - 1, 0), units, base)

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

    def risk(plan: ast.Plan) -> RiskAssessment:
        return assess(plan, reference=reference, bounds=bounds, quote=touch, account=snapshot.account,
                      probe=lambda c: probe(snapshot, c))

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


__all__ = ["interpret", "last_price", "probe", "session_limits", "snapshot_ports"]
