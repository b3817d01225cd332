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
- `working` holds every live entry order, per symbol, with its remaining quantity and its
  reference price (the limit or stop, the touch when placed for MKT);
- the account changes only by `consume` of ledger events and by the corporate actions
  (`split`, `dividend`): a rejected order, which places nothing, never changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from kestrel.engine.ledger import Cancelled, Filled, LedgerEvent, OrderPlaced, PositionChanged
from kestrel.engine.orders import exact, exact_parts
from kestrel.market.portfolio import PortfolioBounds

Touch = Callable[[str], tuple[float, float]]
"""A symbol's touch (bid, ask) at the instant the account is read."""


@dataclass
class Working:
    side: int
    left: Fraction  # units still to fill
    price: Fraction  # the reference price
    mult: Fraction  # the symbol's multiplier

    @property
    def money(self) -> Fraction:
        return self.left * self.price * self.mult


_ZERO = Fraction(0)


@dataclass
class Funds:
    """The account (see the module invariants); `symbols` in universe order. Kept incrementally
    (the sums below are exact, so their order does not matter): `held` the symbols with a
    position, `active` those with a position or a working entry, `committed` the money of the
    working buy entries and `pending` of all working entries, and the values at the touch last
    read (`figures(touch, changed)` re-reads the symbols given and those whose position moved)."""

    symbols: tuple[str, ...]
    multipliers: dict[str, Fraction]
    bounds: PortfolioBounds
    decimals: int
    cash: Fraction = _ZERO
    pos: dict[str, Fraction] = field(default_factory=dict)
    working: dict[str, dict[int, Working]] = field(default_factory=dict)
    open_equity: Fraction = _ZERO  # equity at the session's open (the session maxloss)
    held: set[str] = field(default_factory=set)
    active: set[str] = field(default_factory=set)
    committed: Fraction = _ZERO
    pending: Fraction = _ZERO
    _work: dict[str, Fraction] = field(default_factory=dict)  # per symbol: working entries, signed units
    _values: dict[str, Fraction] = field(default_factory=dict)
    _net: Fraction = _ZERO
    _gross: Fraction = _ZERO
    _moved: set[str] = field(default_factory=set)
    _full: bool = False  # a read asked for every value and was not made

    def __post_init__(self) -> None:
        self.cash = exact(self.bounds.capital)
        for s in self.symbols:
            self.pos.setdefault(s, _ZERO)
            self.working.setdefault(s, {})
            self._work[s] = _ZERO
        self.open_equity = self.cash

    # ------------------------------------------------------------------ changes
    def set_pos(self, symbol: str, units: Fraction) -> None:
        self.pos[symbol] = units
        if units:
            self.held.add(symbol)
        else:
            self.held.discard(symbol)
        self._moved.add(symbol)
        self._activity(symbol)

    def _activity(self, symbol: str) -> None:
        if self.pos[symbol] or self._work[symbol]:
            self.active.add(symbol)
        else:
            self.active.discard(symbol)

    def _unwork(self, symbol: str, w: Working, qty: Fraction) -> None:
        money = qty * w.price * w.mult
        self.pending -= money
        if w.side > 0:
            self.committed -= money
        self._work[symbol] -= w.side * qty
        w.left -= qty

    def consume(self, symbol: str, event: LedgerEvent, touch: tuple[float, float]) -> None:
        """Apply one of `symbol`'s ledger events (`touch` its touch at the event)."""
        if isinstance(event, Filled):
            qty = exact(event.qty)
            signed = qty if event.side == "buy" else -qty
            self.cash -= signed * exact(event.price) * self.multipliers[symbol] + exact(event.fee)
            w = self.working[symbol].get(event.id)
            if w is not None:
                self._unwork(symbol, w, min(qty, w.left))
                if w.left <= 0:
                    del self.working[symbol][event.id]
                self._activity(symbol)
        elif isinstance(event, PositionChanged):
            self.set_pos(symbol, exact(event.pos))
        elif isinstance(event, OrderPlaced):
            if event.role == "entry":
                ref = event.price if event.price is not None else (touch[1] if event.side == "buy" else touch[0])
                w = Working(1 if event.side == "buy" else -1, exact(event.qty), exact(ref), self.multipliers[symbol])
                self.working[symbol][event.id] = w
                money = w.money
                self.pending += money
                if w.side > 0:
                    self.committed += money
                self._work[symbol] += w.side * w.left
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
            self._work[s] = _ZERO
            self._activity(s)
        self.committed = self.pending = _ZERO
        self.open_equity = self.figures(touch)[0]

    def credit(self, amount: Fraction) -> None:
        self.cash += amount

    # ------------------------------------------------------------------ reads
    def value(self, symbol: str, touch: tuple[float, float]) -> Fraction:
        p = self.pos[symbol]
        if not p:
            return _ZERO
        mark = touch[0] if p > 0 else touch[1]
        if mark != mark:
            return _ZERO
        n, d = exact_parts(mark)
        m = self.multipliers[symbol]
        return Fraction(p.numerator * n * m.numerator, p.denominator * d * m.denominator)

    def equity(self, touch: Touch, changed: Iterable[str] | None = None) -> Fraction:
        return self.figures(touch, changed)[0]

    def figures(self, touch: Touch, changed: Iterable[str] | None = None) -> tuple[Fraction, Fraction, Fraction, int]:
        """(equity, gross, net, open positions), exact: every value read afresh (`changed`
        None), or those of `changed` and of the symbols whose position moved since the last
        read (the others' touches have not changed)."""
        if changed is None or self._full:
            self._full = False
            self._values = {s: self.value(s, touch(s)) for s in self.held}
            self._net = sum(self._values.values(), _ZERO)
            self._gross = sum((abs(v) for v in self._values.values()), _ZERO)
        else:
            for s in self._moved.union(changed):
                old = self._values.pop(s, _ZERO)
                new = self.value(s, touch(s)) if s in self.held else _ZERO
                if new:
                    self._values[s] = new
                if old != new:
                    self._net += new - old
                    self._gross += abs(new) - abs(old)
        self._moved.clear()
        return self.cash + self._net, self._gross, self._net, len(self.held)

    def amount(self, x: Fraction) -> float:
        """`x` at the account's quantum (half to even)."""
        scale: int = 10**self.decimals
        k: int = round(x * scale)
        return k / scale

    def text(self, x: Fraction) -> str:
        text = f"{self.amount(x):.{self.decimals}f}"
        if "." in text:  # at least cents, no trailing zeros past them
            whole, frac = text.split(".")
            text = whole + "." + (frac.rstrip("0") + "00")[:max(2, len(frac.rstrip("0")))]
        return text

    def _held(self, symbol: str) -> Fraction:
        """The position and the symbol's working entries, signed."""
        return self.pos[symbol] + self._work[symbol]

    # ------------------------------------------------------------------ the entry check
    def check(self, symbol: str, side: int, qty: Fraction, price: float, touch: Touch, down: str,
              changed: Iterable[str] | None = None) -> str:
        """"" when an entry of `qty` units of `symbol` (`side` +1 buy / -1 sell) at reference
        `price` may be placed, else why not, in this order: the portfolio stood down, no-short,
        max open positions, funding (a buy adding to a long needs the cash not already
        committed to working buys), max gross exposure (after the order, at its price, against
        equity). Measured on the position and working entries of each symbol (`changed` as in
        `figures`)."""
        if changed is None:  # the touches moved: the next read, here or later, reads them all
            self._full = True
        else:
            self._moved.update(changed)
        if down:
            return down
        b = self.bounds
        cur = self._held(symbol)
        new = cur + side * qty
        if b.no_short and new < 0 and new < cur:
            return f"no-short: {symbol} would reach {_units(new)}"
        if b.max_open is not None and cur == 0 and new != 0:
            if len(self.active - {symbol}) >= b.max_open:
                return f"max open positions {b.max_open} reached"
        p = exact(price)
        mult = self.multipliers[symbol]
        buy_cost = (max(new, _ZERO) - max(cur, _ZERO)) * p * mult
        if buy_cost > 0:
            free = self.cash - self.committed
            if buy_cost > free:
                return (f"cannot fund: the buy costs {self.text(buy_cost)}, cash not committed is "
                        f"{self.text(free)}")
        added = (abs(new) - abs(cur)) * p * mult
        if added > 0:
            equity, gross, _, _ = self.figures(touch, ())
            after = gross + self.pending + added
            if after > exact(b.max_gross) * equity:
                return (f"max gross {b.max_gross:g}x equity: gross would reach {self.text(after)} "
                        f"against equity {self.text(equity)}")
        return ""


def _units(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


__all__ = ["Funds", "Touch", "Working"]
