"""The position and its money, kept exactly: what a fill does to the position, the cost basis
and realized PnL.

Invariants:
- quantities (`pos`, fills) are whole numbers of lots; `mult` is the money per price point per
  lot (the multiplier x the lot size, exactly), so a lot of 1 is the unit itself;
- prices are read at their shortest decimal form (`orders.exact`), so the position's cost
  basis `cost` (signed: the sum of signed quantity x price of the open part) and the realized
  PnL `realized` are exact rationals; closing part of a position takes the same share of its
  cost (average cost), so a round trip flat -> flat realizes exactly its cash flow: buy 1 @
  100.00, buy 1 @ 100.01, sell 2 @ 100.05 realizes +0.09;
- money (`rpnl_k`, `fees_k`, `upnl_k`) is a whole number of the engine's quanta (`money`):
  realized PnL is the cumulative exact amount x multiplier rounded once, half to even (so a
  flat book's realized PnL is its cash flow to the quantum), each fee is rounded where it is
  charged, unrealized PnL at a touch is `(pos x touch - cost) x multiplier` rounded;
- `avg` is the double nearest to cost / pos (the exact average entry), 0.0 when flat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from math import gcd

import msgspec

from kestrel.engine.money import Money
from kestrel.engine.orders import BrokerOrder, TickGrid, exact, exact_parts, round_div
from kestrel.market.account import AccountState


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


class Book:
    """The position of one engine and its exact money (see the module invariants). The
    exact rationals are kept as integer pairs in lowest terms (`_cn/_cd` the cost,
    `_rn/_rd` the realized PnL; denominators > 0): the same values `Fraction` arithmetic
    gives, without building one per fill."""

    __slots__ = ("money", "mult", "pos", "_cn", "_cd", "_rn", "_rd", "rpnl_k", "fees_k",
                 "avg", "_mn", "_md", "_marks")

    def __init__(self, money: Money, multiplier: float, lot: Fraction = Fraction(1)) -> None:
        self.money = money
        self.mult = exact(multiplier) * lot  # money per price point per lot
        # multiplier x money scale as an integer ratio: money in quanta = round(x * mn / md)
        self._mn = self.mult.numerator * money.scale
        self._md = self.mult.denominator
        self.pos = 0
        self._cn, self._cd = 0, 1
        self._rn, self._rd = 0, 1
        self.rpnl_k = 0
        self.fees_k = 0
        self.avg = 0.0
        self._marks: dict[float, int] = {}  # upnl_k by touch, for the current position

    @property
    def cost(self) -> Fraction:
        """The open position's exact cost basis (signed quantity x price, summed)."""
        return Fraction(self._cn, self._cd)

    @property
    def realized(self) -> Fraction:
        """The exact realized PnL in price points (before the multiplier)."""
        return Fraction(self._rn, self._rd)

    def restore(self, pos: int, cost: Fraction) -> None:
        """Start from a carried position (no realized PnL, no fees yet this session)."""
        self.pos = pos
        self._cn, self._cd = (cost.numerator, cost.denominator) if pos else (0, 1)
        self.avg = float(cost / pos) if pos else 0.0
        self._marks = {}

    def charge(self, fee: Fraction) -> int:
        """Charge a fee (exact amount); returns it in quanta."""
        if not fee:
            return 0
        k = round_div(fee.numerator * self.money.scale, fee.denominator)
        self.fees_k += k
        return k

    def fill(self, qty: int, price: float) -> int:
        """Apply a fill of signed quantity `qty` at `price`; returns the part that opens or adds
        to a position (0 when the fill only reduces it). (The ratios are reduced inline with
        `gcd`, as `_reduced` does: this runs at every fill.)"""
        pos = self.pos
        pn, pd = exact_parts(price)
        cn, cd = self._cn, self._cd
        if pos == 0 or (pos > 0) == (qty > 0):
            cn, cd = cn * pd + qty * pn * cd, cd * pd  # cost += qty * p
            g = gcd(cn, cd)
            if g > 1:
                cn, cd = cn // g, cd // g
            self.pos = now = pos + qty
            opened = qty if qty > 0 else -qty
        else:
            aq = qty if qty > 0 else -qty
            apos = pos if pos > 0 else -pos
            closed = aq if aq < apos else apos
            opened = aq - closed
            # the closed part's share of the cost: all of it, or cost * closed / |pos|
            sn, sd = (cn, cd) if closed == apos else _reduced(cn * closed, cd * apos)
            # realized += sign(pos) * closed * p - share
            gain = closed * pn if pos > 0 else -closed * pn
            rn, rd = _reduced(gain * sd - sn * pd, pd * sd)
            self._rn, self._rd = _reduced(self._rn * rd + rn * self._rd, self._rd * rd)
            self.pos = now = pos + qty
            if now == 0:
                cn, cd = 0, 1
            elif (now > 0) != (pos > 0):
                cn, cd = _reduced(now * pn, pd)  # the reversal opens at p
            else:
                cn, cd = _reduced(cn * sd - sn * cd, cd * sd)  # cost -= share
            self.rpnl_k = round_div(self._rn * self._mn, self._rd * self._md)
        self._cn, self._cd = cn, cd
        if self._marks:
            self._marks = {}
        # int / int is correctly rounded: the double nearest to the exact average
        self.avg = cn / (cd * now) if now else 0.0
        return opened

    def upnl_k(self, bid: float, ask: float) -> int:
        """Unrealized PnL at the touch (bid for a long, ask for a short), in quanta; 0 before
        the session's first tick (a carried position is marked at its average until then)."""
        pos = self.pos
        if pos == 0:
            return 0
        touch = bid if pos > 0 else ask
        k = self._marks.get(touch)
        if k is not None:
            return k
        if touch != touch:
            return 0
        tn, td = exact_parts(touch)  # (pos x touch - cost) x mult x scale, rounded, in integers
        cn, cd = self._cn, self._cd
        k = round_div((pos * tn * cd - cn * td) * self._mn, td * cd * self._md)
        if len(self._marks) >= 4096:  # a position held across many touches: start over
            self._marks = {}
        self._marks[touch] = k  # the touches repeat: the next time it is a lookup
        return k

    def pnl_k(self, bid: float, ask: float) -> int:
        """rpnl - fees + upnl, in quanta (exact)."""
        k = self.rpnl_k - self.fees_k
        return k + self.upnl_k(bid, ask) if self.pos else k


def _reduced(n: int, d: int) -> tuple[int, int]:
    """n/d in lowest terms (d > 0)."""
    g = gcd(n, d)
    return (n // g, d // g) if g > 1 else (n, d)


def account_of(book: Book, orders: Iterable[BrokerOrder], grid: TickGrid, bid: float,
               ask: float, units: Callable[[int], int | float] = int) -> AccountState:
    """The account as of a touch (b, a): position (in units: `units` of the lots), average
    entry, PnL and working orders."""
    m = book.money
    shown = tuple(o.view(grid, units) for o in orders)
    return AccountState(
        position=units(book.pos),
        avg_entry=book.avg if book.pos else None,
        upnl=m.amount(book.upnl_k(bid, ask)) if book.pos else 0.0,
        rpnl=m.amount(book.rpnl_k),
        fees=m.amount(book.fees_k),
        orders=shown,
    )


def carry_of(book: Book, orders: Iterable[BrokerOrder]) -> Carry | None:
    """What the next session takes over: the position, its exact cost basis and its live
    protective orders (entries never carry); None when flat."""
    if not book.pos:
        return None
    kept = tuple(
        CarriedOrder(o.role, o.side, o.remaining, o.type, o.price, o.oco,
                     o.trail.mode if o.trail else None,
                     float(o.trail.value) if o.trail else None, o.best)
        for o in orders if o.role in ("stop", "target", "trail"))
    return Carry(book.pos, str(book.cost), kept)


__all__ = ["Book", "Carry", "CarriedOrder", "account_of", "carry_of"]
