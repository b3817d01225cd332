"""Working orders of the simulated broker and their fill rules.

Fill rules at a tick whose touch is (bid b, ask a), for an eligible order:
- MKT: fills at the touch (a for buys, b for sells) with adverse slippage;
- LMT: a buy fills when a <= limit at min(limit, a); a sell when b >= limit at max(limit, b)
  (at the limit, or better when the market gaps through); no slippage;
- STP: a buy triggers when a >= stop, a sell when b <= stop, and fills at that touch with
  adverse slippage (the gap is the trader's);
- TRAIL (a protective stop): its level follows the best touch since the entry fill (the
  highest bid for a long, the lowest ask for a short) at the trailing distance; at each tick
  the level is checked first, then ratchets.

Every computed order price (an entry's LMT/STP expression, a bracket's STOP/TARGET, a
trailing level, a slipped fill) is on the instrument's tick grid (`TickGrid`), so a stop at
189.89 triggers when the ask prints 189.89 (189.11 + 0.78 is 189.89000000000001 in binary).
Bracket and trailing levels and slipped fills are computed exactly, in decimal (each price
at its shortest decimal form, the one its data file printed), and rounded to the grid half
to even: 61830 x 1.0005 = 61860.915 is 61860.92, never a binary product's 61860.91.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from collections.abc import Callable

from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Role, WorkingType
from kestrel.market.orders import OrderType
from kestrel.market.account import WorkingOrder
from kestrel.market.instrument import lots_in
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast


@lru_cache(maxsize=65536)
def exact(x: float) -> Fraction:
    """The decimal a double stands for: its shortest round-trip form, exactly (0.1 is 1/10,
    not the binary 0.1000000000000000055...). Prices, offsets and fees are read this way."""
    return Fraction(Decimal(repr(float(x))))


@lru_cache(maxsize=65536)
def exact_parts(x: float) -> tuple[int, int]:
    """`exact(x)` as (numerator, denominator) in lowest terms, denominator > 0: integer
    arithmetic on these is the exact arithmetic, without building `Fraction`s. A plain
    shortest form ("189.89", "-0.5": digits, one point) is read directly from its digits."""
    r = repr(float(x))
    whole, point, frac = r.partition(".")
    if point and frac.isdigit() and (whole.lstrip("-").isdigit()):
        n, d = int(whole + frac), 10 ** len(frac)
        g = math.gcd(n, d)
        return n // g, d // g
    f = exact(x)  # exponent forms (1e-05, 1.5e+16), nan, inf
    return f.numerator, f.denominator


def round_div(p: int, q: int) -> int:
    """p / q rounded to the nearest integer, half to even (q > 0): `round(Fraction(p, q))`
    in integer arithmetic."""
    k, r = divmod(p, q)
    r2 = 2 * r
    if r2 > q or (r2 == q and k & 1):
        return k + 1
    return k


_GRIDS: dict[float, TickGrid] = {}  # the grid of each tick size (see `TickGrid`)


class TickGrid:
    """Rounds prices to the nearest multiple of the tick size (half to even).

    When 1/tick is a whole number (0.01, 0.25, 0.0001 ...) the result is k / (1/tick),
    the double nearest to the decimal price, i.e. the same double a data file's "189.89"
    parses to; otherwise k * tick. `snap_exact` rounds an exact value (a
    `Fraction`) half to even and returns the double nearest to the grid price.

    `quantum` is the price unit of the exact tick-series indicators: half a tick (a mid
    is a whole number of half ticks), as `half_ticks_per_point` per price point (2/tick).

    A grid is its tick (every other field derives from it) and there is one grid per tick:
    `TickGrid(tick)` returns the same object for equal ticks, so the price caches keyed by
    grid (`_bracket_price`, `_slipped`, `_trail_level_exact`) serve every engine of that
    tick, not only the one that filled them, and compare their keys by identity."""

    __slots__ = ("tick", "inv", "tick_exact", "half_ticks_per_point")
    tick: float
    inv: float
    tick_exact: Fraction
    half_ticks_per_point: float

    def __new__(cls, tick: float) -> TickGrid:
        g = _GRIDS.get(tick)
        if g is None:
            g = super().__new__(cls)
            inv = float(round(1.0 / tick))
            g.tick = tick
            g.inv = inv if inv >= 1.0 and abs(inv * tick - 1.0) <= 1e-9 else 0.0
            g.tick_exact = exact(tick)
            g.half_ticks_per_point = 2.0 * (g.inv if g.inv else 1.0 / tick)
            _GRIDS[tick] = g
        return g

    def __reduce__(self) -> tuple[type[TickGrid], tuple[float]]:
        return TickGrid, (self.tick,)  # (a copy or an unpickled grid is the tick's grid)

    def snap_exact(self, x: Fraction) -> float:
        return self.snap_parts(x.numerator, x.denominator)

    def snap_parts(self, n: int, d: int) -> float:
        """`snap_exact(n / d)` for integers n and d > 0 (in any terms: the rounding of a
        ratio does not depend on them), without building a `Fraction`."""
        t = self.tick_exact  # (n / d) / t rounded half to even, in integers (exact)
        k = round_div(n * t.denominator, d * t.numerator)
        return k / self.inv if self.inv else float(k * self.tick_exact)

    def snap(self, price: float) -> float:
        k = round(price / self.tick)
        return k / self.inv if self.inv else k * self.tick


_SIDE = {"buy": 1, "sell": -1}
_LEVELS_MAX = 4096  # bracket levels memoized per ORDER action (see `EntrySpec`)


class EntrySpec:
    """An ORDER action as the broker places it, read once when the plan is adopted: its side
    (+1/-1), signed quantity, TTL in ns, the bracket its fills spawn (the action itself when
    it has a STOP, TARGET or TRAIL, else None; its offsets `stop`, `target`, `trail`) and
    whether the entry's worst-case loss is bounded (a STOP or TRAIL: `entry_risk` is 0.0
    otherwise). `risks` memoizes `entry_risk` by its reference price (the limit or stop
    price, the touch for MKT), of which it is a pure function for a given action and broker;
    `stop_at` and `target_at` memoize the bracket's levels by fill price (one broker, one
    grid, so per action `bracket_price` of the price alone)."""

    __slots__ = ("act", "side", "qty", "signed", "type", "priced", "ttl_ns", "bracket",
                 "bounded", "risks", "stop", "target", "trail", "_stops", "_targets", "size_kind", "size_value")

    def __init__(self, act: ast.Order, lot: float = 1.0) -> None:
        self.act = act
        self.side: int = _SIDE[act.side]
        qty = act.qty if lot == 1 and isinstance(act.qty, int) else lots_in(act.qty, lot)
        assert qty is not None, f"quantity {act.qty} is not a whole number of lots of {lot}"
        self.qty: int = qty  # in lots
        self.signed: int = self.side * qty
        self.type: OrderType = act.order_type
        self.priced: bool = act.order_type != "mkt"
        self.ttl_ns: int | None = None if act.ttl is None else act.ttl.seconds * NS_PER_S
        self.bracket: ast.Order | None = act if (act.stop or act.target or act.trail) else None
        self.bounded: bool = act.stop is not None or act.trail is not None
        self.risks: dict[float, float] = {}
        self.stop: ast.Offset | None = act.stop
        self.target: ast.Offset | None = act.target
        self.trail: ast.Offset | None = act.trail
        self._stops: dict[float, float] = {}
        self._targets: dict[float, float] = {}
        # sized by money (`cash`: an amount) or by a share of equity (`equity`: a fraction):
        # the quantity is worked out at placement (`Broker._sized`); `qty` is then 0
        size = act.size
        self.size_kind: str | None = None if size is None else size.basis
        self.size_value: float = 0.0 if size is None else (size.value if size.basis == "cash" else size.value / 100)

    def stop_at(self, price: float, grid: TickGrid) -> float:
        """The STOP's level for an entry filled at `price` (`bracket_price`)."""
        assert self.stop is not None
        return _level(self._stops, price, self.stop, grid)

    def target_at(self, price: float, grid: TickGrid) -> float:
        """The TARGET's level for an entry filled at `price` (`bracket_price`)."""
        assert self.target is not None
        return _level(self._targets, price, self.target, grid)


def _level(memo: dict[float, float], price: float, offset: ast.Offset, grid: TickGrid) -> float:
    """`bracket_price(price, offset, grid)`, memoized in `memo` (one action's STOP or TARGET:
    the level is a function of the fill price alone), at most `_LEVELS_MAX` entries."""
    got = memo.get(price)
    if got is None:
        got = bracket_price(price, offset, grid)
        if len(memo) >= _LEVELS_MAX:
            memo.clear()
        memo[price] = got
    return got


@dataclass(slots=True, eq=False)
class BrokerOrder:
    """The broker's live, mutable working order (its fills, trailing best and OCO siblings
    change as ticks come), compared by identity. `side` is +1 buy / -1 sell; it is eligible
    at tick index k when k >= `eligible_index` and ts >= `eligible_ts`; `expire_ts` is an
    entry's TTL deadline; `oco` groups the protective siblings of one entry fill; `risk` is an
    entry's worst-case loss per unit (money), 0 when unbounded; `spec` is the entry's action
    (`EntrySpec`) when its fills spawn a bracket; `live` while it is in the broker's working
    orders. What an agent sees of it is `view` (the frame's immutable `WorkingOrder`)."""

    id: int
    plan: str
    rule: int
    role: Role
    side: int
    qty: int
    type: WorkingType
    price: float | None
    parent: int | None
    eligible_index: int
    eligible_ts: int
    expire_ts: int | None = None
    trail: ast.Offset | None = None
    best: float = 0.0
    spec: EntrySpec | None = None
    oco: int | None = None
    filled: int = 0
    risk: float = 0.0
    live: bool = True

    @property
    def entry(self) -> bool:
        """A plan's entry (every other role is protective or closing: reduce-only)."""
        return self.role == "entry"

    @property
    def bracket(self) -> ast.Order | None:
        """The entry's action when its fills spawn a bracket (`spec`), else None."""
        return None if self.spec is None else self.spec.bracket

    @property
    def remaining(self) -> int:
        return self.qty - self.filled

    def trail_level(self, grid: TickGrid) -> float:
        """The trailing stop's level from the best touch so far, on the tick grid."""
        assert self.trail is not None
        return trail_level(self.best, self.trail, self.side, grid)

    def view(self, grid: TickGrid, units: Callable[[int], int | float] = int) -> WorkingOrder:
        """The order as the account shows it: the unfilled remainder (in units: `units` of
        the lots); a trailing stop shows as a STP at its current level."""
        return WorkingOrder(
            id=str(self.id),
            side="buy" if self.side > 0 else "sell",
            qty=units(self.remaining),
            type="stp" if self.type == "trail" else self.type,
            price=self.trail_level(grid) if self.type == "trail" else self.price,
        )


def trail_level(best: float, trail: ast.Offset, side: int, grid: TickGrid) -> float:
    """A trailing stop's level at its distance from `best`: below it for a sell stop
    (`side` -1, protecting a long), above it for a buy stop; exact, on the tick grid.

    The binary level is within 1e-6 tick of the exact one, so unless it falls near a half
    tick its rounding is the exact rounding; near a half tick the level is computed exactly."""
    dist = abs(float(trail.value))
    pct = trail.mode == "pct"
    if side < 0:
        raw = best * (1.0 - dist / 100.0) if pct else best - dist
    else:
        raw = best * (1.0 + dist / 100.0) if pct else best + dist
    k = raw / grid.tick
    if abs(k) < 1e9 and abs(k - math.floor(k) - 0.5) > 1e-4:
        n = round(k)
        return n / grid.inv if grid.inv else float(n * grid.tick_exact)
    return _trail_level_exact(best, trail, side, grid)


@lru_cache(maxsize=4096)
def _trail_level_exact(best: float, trail: ast.Offset, side: int, grid: TickGrid) -> float:
    dist = abs(exact(trail.value))
    b = exact(best)
    if trail.mode == "pct":
        raw = b * (1 - dist / 100) if side < 0 else b * (1 + dist / 100)
    else:
        raw = b - dist if side < 0 else b + dist
    return grid.snap_exact(raw)


def stop_distance(order: ast.Order, entry: float, grid: TickGrid) -> float | None:
    """Per-unit distance from an entry filled at `entry` to its tightest protective stop
    (the STOP level or the TRAIL's initial level, as the broker would place them; a trail
    only ratchets towards the market), or None when the entry has neither."""
    dist: float | None = None  # (the first of the smallest, as `min` picks it)
    if order.stop is not None:
        dist = abs(entry - bracket_price(entry, order.stop, grid))
    if order.trail is not None:
        d = abs(entry - trail_level(entry, order.trail, 1 if order.side == "sell" else -1, grid))
        if dist is None or d < dist:
            dist = d
    return dist


def entry_risk(act: ast.Order, side: int, price: float | None, bid: float, ask: float,
               slip: float, grid: TickGrid, cfg: EngineConfig, lots: int) -> float:
    """Worst-case loss per lot of an entry of `lots` lots if its protective stop is hit at its
    level:
    the stop distance from the expected fill (the limit for LMT, the stop price for STP,
    the current touch for MKT; slippage included) plus the exit's slippage, times the
    multiplier, plus the round trip's fees. 0 when the entry has no STOP or TRAIL."""
    if act.order_type == "lmt":
        assert price is not None
        expected = price
    else:
        ref = price if act.order_type == "stp" and price is not None else (ask if side > 0 else bid)
        expected = ref + side * slip
    dist = stop_distance(act, expected, grid)
    if dist is None:
        return 0.0
    if cfg.lot_size == 1:
        fees = 2.0 * cfg.fee_per_unit + 2.0 * cfg.fee_per_order / lots
        return (dist + slip) * cfg.multiplier + fees
    fees = 2.0 * cfg.fee_per_unit * cfg.lot_size + 2.0 * cfg.fee_per_order / lots
    return (dist + slip) * cfg.multiplier * cfg.lot_size + fees


def bracket_price(entry: float, off: ast.Offset, grid: TickGrid) -> float:
    """A STOP/TARGET price from the entry fill price: exact in decimal, rounded half to even
    onto the tick grid (61830 x (1 + 0.05/100) = 61860.915 -> 61860.92 at 0.01). A pure
    function of its inputs, so cached (entries repeat at the same prices all day)."""
    return _bracket_price(entry, off.mode, off.value, grid)


@lru_cache(maxsize=65536)
def _bracket_price(entry: float, mode: str, value: float, grid: TickGrid) -> float:
    # in integers on the decimal forms: entry = en/ed, the offset v = vn/vd
    vn, vd = exact_parts(value)
    if mode == "at":
        return grid.snap_parts(vn, vd)
    en, ed = exact_parts(entry)
    if mode == "pct":  # entry x (1 + v/100)
        return grid.snap_parts(en * (100 * vd + vn), ed * 100 * vd)
    return grid.snap_parts(en * vd + vn * ed, ed * vd)  # abs: entry + v


def slipped(touch: float, side: int, slip_ticks: Fraction, grid: TickGrid) -> float:
    """A market-style fill at `touch` with `slip_ticks` ticks of adverse slippage (added for
    a buy, subtracted for a sell): exact, on the tick grid. No slippage: the touch as is."""
    if not slip_ticks:
        return touch
    return _slipped(touch, side, slip_ticks, grid)


@lru_cache(maxsize=65536)
def _slipped(touch: float, side: int, slip_ticks: Fraction, grid: TickGrid) -> float:
    return grid.snap_exact(exact(touch) + side * slip_ticks * grid.tick_exact)
