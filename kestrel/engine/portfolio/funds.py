"""The cash account of a portfolio run, kept exactly from the merged ledger, and the checks of
an entry against it (funding and the operator's portfolio bounds).

Invariants (docs/engine.md "The account"):
- `cash` = capital - sum over fills of (signed qty x price x multiplier) - fees + dividends,
  an exact rational (prices, quantities and fees at their shortest decimal form);
- a holding's value = position x mark x multiplier, marked at the touch (bid for a long, ask
  for a short; the touch is the symbol's last tick so far in the merged order, or the
  previous session's when it has none yet); equity = cash + the sum of values; gross = the
  sum of |value|; net = the sum of values; amounts are shown rounded once, half to even, to
  the account's money quantum;
- every money amount is held as an integer numerator over one common denominator `den` (the
  least common multiple of the denominators seen so far, grown and every amount rescaled when
  a new amount needs a finer one): sums and comparisons are exact integer arithmetic, the
  same values `Fraction` arithmetic gives;
- `working` holds every live entry order, per symbol, with its remaining quantity and its
  reference price (the limit or stop, the touch when placed for MKT);
- the account changes only by `consume` of ledger events and by the corporate actions
  (`split`, `dividend`): a rejected order, which places nothing, never changes it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from fractions import Fraction
from functools import lru_cache
from math import gcd

from kestrel.engine.ledger import Cancelled, Filled, LedgerEvent, OrderPlaced, PositionChanged
from kestrel.engine.orders import exact_parts, round_div
from kestrel.market.portfolio import PortfolioBounds

Touch = Callable[[str], tuple[float, float]]
"""A symbol's touch (bid, ask) at the instant the account is read."""

_ZERO = Fraction(0)

_parts = lru_cache(maxsize=4096)(exact_parts)
"""`exact_parts`, remembered: an account reads the same prices, quantities and fees again and
again (the exact parts of a float depend on nothing else)."""

ACCOUNT_EVENTS = (Filled, PositionChanged, OrderPlaced, Cancelled)
"""The ledger events `Funds.consume` reads; every other event leaves the account as it is."""

Units = Fraction | int
"""A quantity in units: an int when whole (the common case: integer arithmetic), else exact."""


def _units_of(n: int, d: int) -> Units:
    return n if d == 1 else Fraction(n, d)


class Working:
    """A live entry: its side (+1 buy / -1 sell), the units still to fill, the money per unit
    (reference price x multiplier, an integer ratio `un/ud`) and the money of what is left
    (`money`, a numerator over the account's `den`)."""

    __slots__ = ("side", "left", "un", "ud", "money")

    def __init__(self, side: int, left: Units, un: int, ud: int, money: int) -> None:
        self.side = side
        self.left = left
        self.un = un
        self.ud = ud
        self.money = money


class Funds:
    """The account (see the module invariants); `symbols` in universe order. Kept incrementally
    (the sums are exact, so their order does not matter): `held` the symbols with a position,
    `active` those with a position or a working entry, `committed` the money of the working buy
    entries and `pending` of all working entries, and the values at the touch last read
    (`figures(touch, changed)` re-reads the held symbols given and those whose position moved:
    one value per symbol that ticked, never a walk over every holding)."""

    def __init__(self, symbols: tuple[str, ...], multipliers: dict[str, Fraction], bounds: PortfolioBounds,
                 decimals: int) -> None:
        self.symbols = symbols
        self.multipliers = multipliers
        self.bounds = bounds
        self.decimals = decimals
        self.scale: int = 10**decimals
        cn, cd = exact_parts(bounds.capital)
        self.den: int = cd
        self._cash: int = cn
        self._committed = 0
        self._pending = 0
        self._open_equity: int = cn  # equity at the session's open (the session maxloss)
        self.pos: dict[str, Units] = {s: 0 for s in symbols}
        self.working: dict[str, dict[int, Working]] = {s: {} for s in symbols}
        self.held: set[str] = set()
        self.active: set[str] = set()
        self._work: dict[str, Units] = {s: 0 for s in symbols}  # working entries, signed units
        self._mult = {s: (m.numerator, m.denominator) for s, m in multipliers.items()}
        self._pm: dict[str, tuple[int, int]] = {}  # held: position x multiplier
        self._values: dict[str, int] = {}  # held: the value at the touch last read
        self._marked: dict[str, float] = {}  # held: the mark that value was read at
        self._net = 0
        self._gross = 0
        self._moved: set[str] = set()
        self._full = False  # a read asked for every value and was not made

    def copy(self) -> Funds:
        """An independent copy (what a session opened from)."""
        f = copy.copy(self)
        f.detach()
        return f

    def detach(self) -> None:
        """Own copies of every mutable part (after a shallow copy shared them)."""
        self.pos, self._work, self._pm = dict(self.pos), dict(self._work), dict(self._pm)
        self._values, self._marked = dict(self._values), dict(self._marked)
        self.held, self.active, self._moved = set(self.held), set(self.active), set(self._moved)
        self.working = {s: {i: Working(w.side, w.left, w.un, w.ud, w.money) for i, w in ws.items()}
                        for s, ws in self.working.items()}

    # ------------------------------------------------------------------ exact money
    def _at(self, n: int, d: int) -> int:
        """n/d (d > 0) as a numerator over `den`, growing `den` when it is not a multiple of d."""
        den = self.den
        if den % d:
            g = gcd(n, d)
            if g > 1:
                n, d = n // g, d // g
            if den % d:
                self._grow(d)
                den = self.den
        return n * (den // d)

    def _grow(self, d: int) -> None:
        new = self.den * d // gcd(self.den, d)
        k = new // self.den
        self.den = new
        self._cash *= k
        self._committed *= k
        self._pending *= k
        self._open_equity *= k
        self._net *= k
        self._gross *= k
        for s in self._values:
            self._values[s] *= k
        for ws in self.working.values():
            for w in ws.values():
                w.money *= k

    def _money(self, units: Units, un: int, ud: int) -> int:
        return self._at(units.numerator * un, units.denominator * ud)

    @property
    def cash(self) -> Fraction:
        return Fraction(self._cash, self.den)

    @property
    def cash_n(self) -> int:
        return self._cash

    @property
    def open_equity(self) -> Fraction:
        return Fraction(self._open_equity, self.den)

    # ------------------------------------------------------------------ changes
    def set_pos(self, symbol: str, units: Units) -> None:
        self.pos[symbol] = units
        if units:
            self.held.add(symbol)
            mn, md = self._mult[symbol]
            self._pm[symbol] = (units.numerator * mn, units.denominator * md)
        else:
            self.held.discard(symbol)
            self._pm.pop(symbol, None)
        self._marked.pop(symbol, None)
        self._moved.add(symbol)
        self._activity(symbol)

    def _activity(self, symbol: str) -> None:
        if self.pos[symbol] or self._work[symbol]:
            self.active.add(symbol)
        else:
            self.active.discard(symbol)

    def _unwork(self, symbol: str, order: Working, qty: Units) -> None:
        money = order.money if qty == order.left else self._money(qty, order.un, order.ud)
        self._pending -= money
        if order.side > 0:
            self._committed -= money
        order.money -= money
        self._work[symbol] -= order.side * qty
        order.left -= qty

    def consume(self, symbol: str, event: LedgerEvent, touch: tuple[float, float]) -> None:
        """Apply one of `symbol`'s ledger events (`touch` its touch at the event: read only for
        an entry placed at market)."""
        if isinstance(event, Filled):
            qn, qd = _parts(event.qty)
            pn, pd = _parts(event.price)
            mn, md = self._mult[symbol]
            fn, fd = _parts(event.fee)
            flow = self._at(qn * pn * mn, qd * pd * md)
            self._cash += -flow if event.side == "buy" else flow
            if fn:
                fee = self._at(fn, fd)  # (read before the cash: it may rescale it)
                self._cash -= fee
            w = self.working[symbol].get(event.id)
            if w is not None:
                qty = _units_of(qn, qd)
                self._unwork(symbol, w, qty if qty < w.left else w.left)
                if w.left <= 0:
                    del self.working[symbol][event.id]
                self._activity(symbol)
        elif isinstance(event, PositionChanged):
            n, d = _parts(event.pos)
            self.set_pos(symbol, _units_of(n, d))
        elif isinstance(event, OrderPlaced):
            if event.role == "entry":
                ref = event.price if event.price is not None else (touch[1] if event.side == "buy" else touch[0])
                pn, pd = _parts(ref)
                mn, md = self._mult[symbol]
                qn, qd = _parts(event.qty)
                qty = _units_of(qn, qd)
                side = 1 if event.side == "buy" else -1
                un, ud = pn * mn, pd * md
                money = self._money(qty, un, ud)
                self.working[symbol][event.id] = Working(side, qty, un, ud, money)
                self._pending += money
                if side > 0:
                    self._committed += money
                self._work[symbol] += side * qty
                self._activity(symbol)
        elif isinstance(event, Cancelled):
            w = self.working[symbol].pop(event.id, None)
            if w is not None:
                self._unwork(symbol, w, w.left)
                self._activity(symbol)

    def new_session(self, touch: Touch) -> None:
        """A session opens: no entry works (entries never carry); the values are read afresh;
        the session maxloss counts from the equity now."""
        for s in self.symbols:
            self.working[s] = {}
            self._work[s] = 0
            self._activity(s)
        self._committed = self._pending = 0
        self._open_equity = self.marks(touch)[0]

    def credit(self, amount: Fraction) -> None:
        credit = self._at(amount.numerator, amount.denominator)  # (may rescale the cash: read it after)
        self._cash += credit

    # ------------------------------------------------------------------ reads
    def _value(self, symbol: str, touch: tuple[float, float]) -> int:
        """The held `symbol`'s value at `touch`, over `den` (0 at an unknown mark)."""
        pn, pd = self._pm[symbol]
        mark = touch[0] if pn > 0 else touch[1]
        if mark != mark:
            return 0
        tn, td = _parts(mark)
        return self._at(pn * tn, pd * td)

    def value(self, symbol: str, touch: tuple[float, float]) -> Fraction:
        if not self.pos[symbol]:
            return _ZERO
        v = self._value(symbol, touch)
        return Fraction(v, self.den)

    def _reread(self, symbol: str, touch: Touch) -> None:
        if symbol in self.held:
            t = touch(symbol)
            mark = t[0] if self._pm[symbol][0] > 0 else t[1]
            if symbol in self._values and self._marked.get(symbol) == mark:
                return
            new = self._value(symbol, t)  # (may rescale every stored amount: read the old one after)
            old = self._values.get(symbol, 0)
            self._values[symbol] = new
            self._marked[symbol] = mark
        else:
            old = self._values.pop(symbol, 0)
            self._marked.pop(symbol, None)
            new = 0
        if old != new:
            self._net += new - old
            self._gross += abs(new) - abs(old)

    def marks(self, touch: Touch, changed: Iterable[str] | None = None) -> tuple[int, int, int, int]:
        """(equity, gross, net, open positions), the money as numerators over `den`: every
        value read afresh (`changed` None), or those of the held symbols of `changed` and of
        the symbols whose position moved since the last read (the others' touches have not
        changed)."""
        if changed is None or self._full:
            self._full = False
            self._values, self._marked = {}, {}
            self._net = self._gross = 0
            for s in self.symbols:
                if s in self.held:
                    t = touch(s)
                    self._values[s] = self._value(s, t)
                    self._marked[s] = t[0] if self._pm[s][0] > 0 else t[1]
            self._net = sum(self._values.values())
            self._gross = sum(abs(v) for v in self._values.values())
        else:
            for s in self._moved:
                self._reread(s, touch)
            if not isinstance(changed, (set, frozenset)):
                changed = set(changed)
            for s in changed & self.held:
                if s not in self._moved:
                    self._reread(s, touch)
        self._moved.clear()
        return self._cash + self._net, self._gross, self._net, len(self.held)

    def equity(self, touch: Touch, changed: Iterable[str] | None = None) -> Fraction:
        return Fraction(self.marks(touch, changed)[0], self.den)

    def figures(self, touch: Touch, changed: Iterable[str] | None = None) -> tuple[Fraction, Fraction, Fraction, int]:
        """`marks` as exact rationals."""
        e, g, n, k = self.marks(touch, changed)
        return Fraction(e, self.den), Fraction(g, self.den), Fraction(n, self.den), k

    def shown(self, n: int) -> float:
        """The amount n/`den` at the account's quantum (half to even)."""
        return round_div(n * self.scale, self.den) / self.scale

    def amount(self, x: Fraction) -> float:
        """`x` at the account's quantum (half to even)."""
        return round_div(x.numerator * self.scale, x.denominator) / self.scale

    def loss_reached(self, equity: int, loss: float) -> bool:
        """equity (over `den`) <= the session's opening equity - `loss`."""
        ln, ld = exact_parts(loss)
        return equity * ld <= self._open_equity * ld - ln * self.den

    def text(self, x: Fraction) -> str:
        text = f"{self.amount(x):.{self.decimals}f}"
        if "." in text:  # at least cents, no trailing zeros past them
            whole, frac = text.split(".")
            text = whole + "." + (frac.rstrip("0") + "00")[:max(2, len(frac.rstrip("0")))]
        return text

    def _held(self, symbol: str) -> Units:
        """The position and the symbol's working entries, signed."""
        return self.pos[symbol] + self._work[symbol]

    # ------------------------------------------------------------------ the entry check
    def check(self, symbol: str, side: int, qty: Units, price: float, touch: Touch, down: str,
              changed: Iterable[str] | None = None) -> str:
        """"" when an entry of `qty` units of `symbol` (`side` +1 buy / -1 sell) at reference
        `price` may be placed, else why not, in this order: the portfolio stood down, no-short,
        max open positions, funding (a buy adding to a long needs the cash not already
        committed to working buys), max gross exposure (after the order, at its price, against
        equity). Measured on the position and working entries of each symbol (`changed` as in
        `marks`)."""
        if changed is None:  # the touches moved: the next read, here or later, reads them all
            self._full = True
        else:
            self._moved.update(changed)
        if down:
            return down
        b = self.bounds
        cur = self._held(symbol)
        new: Units = cur + side * qty
        if b.no_short and new < 0 and new < cur:
            return f"no-short: {symbol} would reach {_units(new)}"
        if b.max_open is not None and cur == 0 and new != 0:
            if len(self.active) - (symbol in self.active) >= b.max_open:
                return f"max open positions {b.max_open} reached"
        pn, pd = _parts(price)
        mn, md = self._mult[symbol]
        un, ud = pn * mn, pd * md
        den = self.den
        buy: Units = (new if new > 0 else 0) - (cur if cur > 0 else 0)
        if buy > 0:  # the cost n/d against the free cash (over den)
            n, d = buy.numerator * un, buy.denominator * ud
            free = self._cash - self._committed
            if n * den > free * d:
                return (f"cannot fund: the buy costs {self.text(Fraction(n, d))}, cash not committed is "
                        f"{self.text(Fraction(free, den))}")
        add: Units = (new if new > 0 else -new) - (cur if cur > 0 else -cur)
        if add > 0:
            n, d = add.numerator * un, add.denominator * ud
            equity, gross, _, _ = self.marks(touch, ())
            den = self.den
            gn, gd = exact_parts(b.max_gross)
            after_n = (gross + self._pending) * d + n * den  # after = after_n / (den * d)
            if after_n * gd > gn * equity * d:
                return (f"max gross {b.max_gross:g}x equity: gross would reach "
                        f"{self.text(Fraction(after_n, den * d))} against equity {self.text(Fraction(equity, den))}")
        return ""


def _units(x: Units) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


__all__ = ["ACCOUNT_EVENTS", "Funds", "Touch", "Units", "Working"]
