"""The operator's default bounds, scaled to the instrument.

Rule: when the operator sets no `maxpos`, a session's is the position whose notional at the
reference price is `NOTIONAL_PER_MAXLOSS` times the plan loss bound (`maxloss`, default 1000:
a notional of 100,000 in the instrument's quote currency), so a full position moving 1% against
it loses one maxloss. In lots of the instrument: `notional / (price x multiplier x lot)`,
rounded down to two significant figures of lots (a readable bound that says little about the
price) and never below one lot. 100,000 USD is 550 shares at 180, 72,000 EUR at 1.376, 1.6 BTC
at 61,000 (a lot of 0.0001), one CME 6E contract (135,000 at 1.08).

The reference price is the data's first quote (the mid of its first tick, its last price when
the quote is not two-sided): fixed before the run, the same for every ordinal and day of it,
so the bound is part of the run's inputs and a replay derives the same.

Invariants: the default is a pure function of (instrument, reference price, maxloss); it is a
whole number of lots >= 1; an operator's explicit `maxpos` is never changed.
"""

from __future__ import annotations

import math

import msgspec

from kestrel.engine.config import EngineConfig
from kestrel.market import MarketData
from kestrel.market.instrument import Instrument, exact_qty, units_of

NOTIONAL_PER_MAXLOSS = 100
"""The default position's notional, in plan loss bounds (1% of it is one maxloss)."""


def _two_figures(n: int) -> int:
    """`n` rounded down to two significant figures (72992 -> 72000, 555 -> 550, 16 -> 16)."""
    if n < 100:
        return n
    step: int = 10 ** (len(str(n)) - 2)
    return n // step * step


def default_maxpos(instrument: Instrument, price: float, maxloss: float,
                   lot: float | None = None) -> int | float:
    """The operator's default maxpos in units (see the module rule); `lot` overrides the
    instrument's lot size (fractional shares the operator allows)."""
    lot = instrument.lot_size if lot is None else lot
    if not (price > 0 and math.isfinite(price)):
        raise ValueError(f"the reference price must be a finite number > 0, got {price!r}")
    notional = exact_qty(NOTIONAL_PER_MAXLOSS * maxloss)
    per_lot = exact_qty(price) * exact_qty(instrument.multiplier) * exact_qty(lot)
    lots = max(1, _two_figures(int(notional / per_lot)))
    return units_of(lots, lot)


def reference_price(data: MarketData) -> float | None:
    """The data's first quote: the mid of its first tick, else its last price (None: no tick
    with a positive finite price)."""
    t = data.ticks
    if not len(t):
        return None
    bid, ask, last = float(t.bid[0]), float(t.ask[0]), float(t.last[0])
    if bid > 0 and ask >= bid and math.isfinite(ask):
        return (bid + ask) / 2.0
    return last if last > 0 and math.isfinite(last) else None


def scaled(config: EngineConfig, data: MarketData) -> EngineConfig:
    """`config` with the instrument's lot size (unless the operator set one: a lot of 1 means
    the instrument's) and, when it has no maxpos, the default scaled to the instrument."""
    lot = config.lot_size if config.lot_size != 1 else data.instrument.lot_size
    maxpos = config.maxpos
    if maxpos is None:
        price = reference_price(data)
        maxpos = (config.operator_maxpos if price is None
                  else default_maxpos(data.instrument, price, config.maxloss, lot))
    if lot == config.lot_size and maxpos == config.maxpos:
        return config
    return msgspec.structs.replace(config, lot_size=lot, maxpos=maxpos)


__all__ = ["NOTIONAL_PER_MAXLOSS", "default_maxpos", "reference_price", "scaled"]
