"""The authoring loop's ports wired to the real language and frame for one frozen snapshot.

Everything here is a pure function of (snapshot, ordinal, catalog, allowed panes, bounds): the
briefing text, view resolution, the self-correction dry-run and the risk classifier all read
the one frozen snapshot, so a re-ask after a view request sees the SAME market.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from kestrel import lang
from kestrel.frame import (
    DEFAULT_CATALOG,
    FrozenSnapshot,
    Ordinal,
    PaneCatalog,
    ResolvedView,
    SessionSpec,
)
from kestrel.frame import briefing as frame_briefing
from kestrel.frame import resolve_view as frame_resolve_view
from kestrel.frame.ticks import NS_PER_S
from kestrel.lang import ast
from kestrel.session.loop import Kernel, LoopPorts
from kestrel.session.protocol import Reply, interpret_reply
from kestrel.session.risk import RiskAssessment, RiskBounds, classify, dry_run


def interpret(text: str, limits: lang.Limits | None = None) -> Reply:
    """The runtime's interpretation of raw agent text with the Kestrel language."""
    return interpret_reply(text, parse=lambda body: lang.parse(body, limits))


def session_limits(session: SessionSpec | None) -> lang.Limits:
    """The language bounds for plans authored in `session`: a window can look back at most
    to the session's open (the engine evaluates one session), so `high(1d)` in a 6.5 h equity
    session is an error the author can repair, never a rule that silently cannot fire."""
    base = lang.DEFAULT_LIMITS
    if session is None:
        return base
    span_s = (session.close_ns - session.open_ns) // NS_PER_S
    return msgspec.structs.replace(base, max_window_seconds=min(base.max_window_seconds, span_s))


def last_price(snapshot: FrozenSnapshot) -> float | None:
    t = snapshot.ticks
    return float(t.last[-1]) if len(t) else None


def probe(snapshot: FrozenSnapshot, cond: ast.Expr) -> bool | None:
    """Whether `cond` already holds at the cutoff, for the conditions that can be judged from
    the quote and price windows alone (None = cannot tell)."""
    t = snapshot.ticks
    if len(t) == 0:
        return None

    def value(e: ast.Expr) -> float | None:
        if isinstance(e, ast.Number):
            return e.value
        if isinstance(e, ast.Series):
            i = len(t) - 1
            quote = {
                "last": float(t.last[i]),
                "bid": float(t.bid[i]),
                "ask": float(t.ask[i]),
                "mid": (float(t.bid[i]) + float(t.ask[i])) / 2.0,
                "spread": float(t.ask[i]) - float(t.bid[i]),
            }
            return quote.get(e.name)
        if isinstance(e, ast.Call) and e.name in ("high", "low") and len(e.args) == 1:
            d = e.args[0]
            if not isinstance(d, ast.Duration):
                return None
            now = int(t.ts[-1])
            w = t.between(now - d.seconds * NS_PER_S, now)
            if len(w) == 0:
                return None
            return float(np.max(w.last)) if e.name == "high" else float(np.min(w.last))
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
) -> LoopPorts:
    """Ports for one ordinal's loop, all reading `snapshot`."""
    allowed = None if allowed_panes is None else tuple(allowed_panes)
    reference = last_price(snapshot)

    def resolve(view: ast.View) -> object:
        if allowed is not None:
            banned = [p.name for p in view.panes if p.name not in allowed and p.name in catalog]
            if banned:
                raise ValueError(
                    f"invalid VIEW {view.name}: pane {banned[0]!r} is not allowed in this mode; "
                    f"allowed panes: {', '.join(allowed)}"
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
        return frame_briefing(snapshot, ordinal, chosen, {"budget": budget}, catalog)

    def run_dry(plan: ast.Plan) -> tuple[str, ...]:
        return dry_run(plan, reference=reference, bounds=bounds, probe=lambda c: probe(snapshot, c))

    def risk(plan: ast.Plan) -> RiskAssessment:
        return classify(plan, reference=reference, bounds=bounds)

    limits = session_limits(snapshot.session)

    def read(text: str) -> Reply:
        return interpret(text, limits)

    return LoopPorts(
        interpret=read, resolve_view=resolve, briefing=render, dry_run=run_dry, classify=risk
    )


__all__ = ["interpret", "last_price", "probe", "session_limits", "snapshot_ports"]
