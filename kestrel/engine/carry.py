"""What a session hands the next under `end_of_day="carry"` (`book.carry_of` builds it).

These msgspec Structs live in a module that is not compiled: a Struct class defined in a
mypyc-compiled module loses its class options (`frozen=True` here), so the compiled and the
pure engine would hand over different objects. `kestrel.engine.book` re-exports them.
"""

from __future__ import annotations

from fractions import Fraction

import msgspec


class CarriedOrder(msgspec.Struct, frozen=True):
    """A protective order carried into the next session: role stop | target | trail, its
    side (+1 buy / -1 sell), remaining quantity, price (stop / target) or the trail's
    offset and best touch so far, and its OCO group."""

    role: str
    side: int
    qty: int
    type: str
    price: float | None
    oco: int | None
    trail_mode: str | None = None
    trail_value: float | None = None
    best: float = 0.0


class Carry(msgspec.Struct, frozen=True):
    """What a session hands the next under `end_of_day="carry"`: the position, its exact cost
    basis (as a decimal string), and its live protective orders (`CarriedOrder`)."""

    pos: int
    cost: str
    orders: tuple[CarriedOrder, ...] = ()

    @property
    def avg_price(self) -> float:
        return float(Fraction(self.cost) / self.pos) if self.pos else 0.0


__all__ = ["Carry", "CarriedOrder"]
