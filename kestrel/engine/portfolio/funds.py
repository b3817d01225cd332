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

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from kestrel.engine.ledger import Cancelled, Filled, LedgerEvent, OrderPlaced, PositionChanged
from kestrel.engine.orders import exact
from kestrel.market.portfolio import PortfolioBounds

Touch = Callable[[str], tuple[float, float]]
"""A symbol's touch (bid, ask) at the instant the account is read."""


@dataclass
class Working:
    side: int
    left: Fraction  # units still to fill
    price: Fraction  # the reference price


@dataclass
class Funds:
    """The account (see the module invariants); `symbols` in universe order."""

    symbols: tuple[str, ...]
    multipliers: dict[str, Fraction]
    bounds: PortfolioBounds
    decimals: int
    cash: Fraction = Fraction(0)
    pos: dict[str, Fraction] = field(default_factory=dict)
    working: dict[str, dict[int, Working]] = field(default_factory=dict)
    open_equity: Fraction = Fraction(0)  # equity at the session's open (the session maxloss)

    def __post_init__(self) -> None:
        self.cash = exact(self.bounds.capital)
        for s in self.symbols:
            self.pos.setdefault(s, Fraction(0))
            self.working.setdefault(s, {})
        self.open_equity = self.cash

    # ------------------------------------------------------------------ changes
    def consume(self, symbol: str, event: LedgerEvent, touch: tuple[float, float]) -> None:
        """Apply one of `symbol`'s ledger events (`touch` its touch at the event)."""
        if isinstance(event, Filled):
            qty = exact(event.qty)
            signed = qty if event.side == "buy" else -qty
            self.cash -= signed * exact(event.price) * self.multipliers[symbol] + exact(event.fee)
            w = self.working[symbol].get(event.id)
            if w is not None:
                w.left -= qty
                if w.left <= 0:
                    del self.working[symbol][event.id]
        elif isinstance(event, PositionChanged):
            self.pos[symbol] = exact(event.pos)
        elif isinstance(event, OrderPlaced):
            if event.role == "entry":
                ref = event.price if event.price is not None else (touch[1] if event.side == "buy" else touch[0])
                self.working[symbol][event.id] = Working(1 if event.side == "buy" else -1, exact(event.qty),
                                                         exact(ref))
        elif isinstance(event, Cancelled):
            self.working[symbol].pop(event.id, None)

    def new_session(self, touch: Touch) -> None:
        """A session opens: no entry works (entries never carry); the session maxloss counts
        from the equity now."""
        for s in self.symbols:
            self.working[s] = {}
        self.open_equity = self.equity(touch)

    def credit(self, amount: Fraction) -> None:
        self.cash += amount

    # ------------------------------------------------------------------ reads
    def value(self, symbol: str, touch: tuple[float, float]) -> Fraction:
        p = self.pos[symbol]
        if not p:
            return Fraction(0)
        mark = touch[0] if p > 0 else touch[1]
        if mark != mark:
            return Fraction(0)
        return p * exact(mark) * self.multipliers[symbol]

    def equity(self, touch: Touch) -> Fraction:
        return self.cash + sum((self.value(s, touch(s)) for s in self.symbols if self.pos[s]), Fraction(0))

    def figures(self, touch: Touch) -> tuple[Fraction, Fraction, Fraction, int]:
        """(equity, gross, net, open positions), exact."""
        values = [self.value(s, touch(s)) for s in self.symbols if self.pos[s]]
        net = sum(values, Fraction(0))
        return self.cash + net, sum((abs(v) for v in values), Fraction(0)), net, len(values)

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
        return self.pos[symbol] + sum((w.side * w.left for w in self.working[symbol].values()), Fraction(0))

    # ------------------------------------------------------------------ the entry check
    def check(self, symbol: str, side: int, qty: Fraction, price: float, touch: Touch, down: str) -> str:
        """"" when an entry of `qty` units of `symbol` (`side` +1 buy / -1 sell) at reference
        `price` may be placed, else why not, in this order: the portfolio stood down, no-short,
        max open positions, funding (a buy adding to a long needs the cash not already
        committed to working buys), max gross exposure (after the order, at its price, against
        equity). Measured on the position and working entries of each symbol."""
        if down:
            return down
        b = self.bounds
        cur = self._held(symbol)
        new = cur + side * qty
        if b.no_short and new < 0 and new < cur:
            return f"no-short: {symbol} would reach {_units(new)}"
        if b.max_open is not None and cur == 0 and new != 0:
            held = sum(1 for s in self.symbols if s != symbol and self._held(s) != 0)
            if held >= b.max_open:
                return f"max open positions {b.max_open} reached"
        p = exact(price)
        mult = self.multipliers[symbol]
        buy_cost = (max(new, Fraction(0)) - max(cur, Fraction(0))) * p * mult
        if buy_cost > 0:
            committed = sum((w.left * w.price * self.multipliers[s]
                             for s in self.symbols for w in self.working[s].values() if w.side > 0),
                            Fraction(0))
            free = self.cash - committed
            if buy_cost > free:
                return (f"cannot fund: the buy costs {self.text(buy_cost)}, cash not committed is "
                        f"{self.text(free)}")
        added = (abs(new) - abs(cur)) * p * mult
        if added > 0:
            equity, gross, _, _ = self.figures(touch)
            pending = sum((w.left * w.price * self.multipliers[s]
                           for s in self.symbols for w in self.working[s].values()), Fraction(0))
            after = gross + pending + added
            if after > exact(b.max_gross) * equity:
                return (f"max gross {b.max_gross:g}x equity: gross would reach {self.text(after)} "
                        f"against equity {self.text(equity)}")
        return ""


def _units(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


__all__ = ["Funds", "Touch", "Working"]
