"""The terms of trading an operator sets: the risk bounds and the friction of the fill model.

They are the rules of the game an agent plays under, rendered into every briefing (the RULES
kernel pane, `kestrel.frame.rules`) and carried typed in its snapshot. The session layer fills
them from the engine's configuration (`kestrel.session.rules.terms_of`); the defaults here are
the engine's defaults (a test holds them equal).

Invariants: `Bounds` are the operator's (a plan's RISK clause can only tighten them: each
effective bound is the smaller of the two); `Friction` is what every fill pays; both are
immutable msgspec Structs, so they travel in messages and encode canonically.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class Bounds(msgspec.Struct, frozen=True, kw_only=True):
    """The operator's risk bounds: `maxpos` the largest absolute position (units), `maxloss`
    the loss a plan may take from its arming (money), `maxorders` the orders a plan may place,
    `session_maxloss` the loss of the whole session from its open (None: no limit)."""

    maxpos: int | float = 1000
    maxloss: float = 1000.0
    maxorders: int = 50
    session_maxloss: float | None = None


class Friction(msgspec.Struct, frozen=True, kw_only=True):
    """What a fill pays: `slippage_ticks` adverse ticks on market-style fills, an order's
    latency (`latency_ticks` ticks and `latency_ms` milliseconds before it is eligible), fees
    per unit and per order, and the end-of-day policy (`flatten` or `carry`)."""

    slippage_ticks: float = 0.0
    latency_ticks: int = 0
    latency_ms: float = 0.0
    fee_per_unit: float = 0.0
    fee_per_order: float = 0.0
    end_of_day: Literal["flatten", "carry"] = "flatten"
    partial_fills: bool = False

    @property
    def frictionless(self) -> bool:
        return not (self.slippage_ticks or self.latency_ticks or self.latency_ms
                    or self.fee_per_unit or self.fee_per_order)


class Terms(msgspec.Struct, frozen=True, kw_only=True):
    """The operator's bounds and the friction of one run."""

    bounds: Bounds = Bounds()
    friction: Friction = Friction()


DEFAULT_TERMS = Terms()


__all__ = ["DEFAULT_TERMS", "Bounds", "Friction", "Terms"]
