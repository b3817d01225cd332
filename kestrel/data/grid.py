"""The tick grid: the price step a file's prices lie on (`infer_tick_size`), and the check
that every recorded price is a whole multiple of a given tick size (`check_tick_grid`)."""

from __future__ import annotations

import math

import numpy as np

from kestrel.data.errors import DataError
from kestrel.data.readers import Table
from kestrel.market.ticks import F64

MAX_TICK_DECIMALS = 8
MIN_TICK_SIZE = 1e-12  # a given tick size: from this up to the smallest positive price
_PRICE_ROLES = ("bid", "ask", "price", "open", "high", "low", "close", "bid_open", "ask_open")
_EPS = float(np.finfo(np.float64).eps)


def _on_grid(p: F64, d: int) -> bool:
    scaled = p * 10.0**d
    tol = 16 * _EPS * max(float(np.max(scaled)), 1.0)  # p >= 0: a few ulps of the largest
    return bool(np.max(np.abs(scaled - np.round(scaled))) <= tol)


def _decimals(p: F64) -> int | None:
    """Fewest decimals d <= MAX_TICK_DECIMALS writing every price as a whole multiple of
    10**-d, within float noise (a few ulps of the scaled value); None if none does."""
    return next((d for d in range(MAX_TICK_DECIMALS + 1) if _on_grid(p, d)), None)


def infer_tick_size(prices: F64) -> float:
    """The greatest common step of the price grid: with d the fewest decimals that write every
    price (up to 8), the tick is gcd(prices * 10**d) / 10**d. So CME 6E quoted in steps of
    0.00005 gives 5e-05 (not 1e-05), a quarter-point grid 0.25. Prices needing more than 8
    decimals give 1e-08; a single distinct price gives 10**-d (a grid needs two prices: pass
    the tick size when the file is that sparse). Every price counts: a prefix gives the first
    guess, which one vectorized pass over all prices confirms (or refines)."""
    p = np.abs(prices[np.isfinite(prices)])
    if p.size == 0:
        return 1.0
    head = p[:20_000]
    d = _decimals(head)
    if d is None or not _on_grid(p, d):
        d = _decimals(p)
    if d is None:
        return 10.0**-MAX_TICK_DECIMALS
    ints = np.round(p * 10.0**d).astype(np.int64)
    g = int(np.gcd.reduce(ints[:20_000]))
    if g > 1 and np.any(ints % g):
        g = int(np.gcd.reduce(ints))
    if g == 0 or np.all(ints == ints[0]):  # one price: no step to see, keep the decimal step
        g = 1
    return float(g / 10**d)


def check_tick_grid(t: Table, tick: float) -> None:
    """Every recorded price must be a whole multiple of `tick` (within float noise)."""
    if not (MIN_TICK_SIZE <= tick and math.isfinite(tick)):
        raise DataError(t.path, f"tick size must be a number >= {MIN_TICK_SIZE:g}, got {tick!r}")
    prices = np.concatenate([v for r, v in t.values.items() if r in _PRICE_ROLES])
    positive = prices[prices > 0]
    if positive.size and tick > float(positive.min()):
        raise DataError(t.path, f"tick size {tick:g} is larger than the smallest price {float(positive.min()):g}: "
                                "give the instrument's real tick size or omit it to infer it")
    for role in _PRICE_ROLES:
        v = t.values.get(role)
        if v is None:
            continue
        q = v / tick
        off = np.flatnonzero(np.abs(q - np.round(q)) > 1e-6 + 64 * _EPS * np.abs(q))
        if off.size:
            i = int(off[0])
            raise DataError(
                t.path,
                f"price {float(v[i])!r} is not a multiple of the tick size {tick:g} ({off.size} "
                f"price{'s' if off.size != 1 else ''} off that grid); give the instrument's real tick size or omit it to infer it "
                f"(inferred: {infer_tick_size(v):g})",
                column=t.columns[role],
                **t.where(i),
            )


__all__ = ["MAX_TICK_DECIMALS", "MIN_TICK_SIZE", "check_tick_grid", "infer_tick_size"]
