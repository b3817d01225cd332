"""Engine configuration: default risk bounds, fees, slippage, latency, end-of-day policy.

Invariants: every field is validated when the Struct is built or decoded (`__post_init__`, and
the `Meta` bounds on decode: non-negative costs, positive finite bounds), so an `EngineConfig`
that exists is valid; the engine never reads wall-clock time, so a config fully determines
the execution model together with the ticks and the plans.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from kestrel.market.instrument import check_lot, lots_in
from kestrel.structs import check_fields

Positive = Annotated[int, Meta(gt=0)]
PositiveMoney = Annotated[float, Meta(gt=0)]
NonNegative = Annotated[float, Meta(ge=0)]
NonNegativeInt = Annotated[int, Meta(ge=0)]


DEFAULT_MAXPOS = 1000
"""The engine's maxpos, in units, when the config gives none."""


class EngineConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Execution model and the operator's risk bounds.

    - `maxpos`, `maxloss`, `maxorders`: the operator's caps; a plan's `RISK` may only
      tighten them (each effective bound is min(operator, plan)); `maxloss` counts from the
      plan's arming; `maxpos` is in units of the instrument, a whole number of lots, None for the default (an engine
      takes `DEFAULT_MAXPOS` units; a session scales it to the instrument, see
      `kestrel.session.defaults`);
    - `session_maxloss`: the session's loss limit (net PnL since the open, fees included),
      never reset by a new plan; reaching it stands the session down (None: no limit);
    - `slippage_ticks`: adverse slippage, in ticks of the instrument's tick size, added to
      every market-style fill (MKT, triggered STP, trailing stop, flatten);
    - `latency_ticks` / `latency_ns`: an order created at tick i is eligible from tick
      i + 1 + latency_ticks, and not before ts_i + latency_ns;
    - `fee_per_unit`: per share/contract filled; `fee_per_order`: once per order, on its
      first fill; `multiplier`: money per price point per unit (1 for equities);
    - `end_of_day`: `flatten` closes everything at the session close, `carry` keeps the
      position and its protective orders;
    - `partial_fills`: when True and the tick has a positive size, a fill takes at most
      that size;
    - `money_decimals`: the money quantum is 10**-money_decimals (0..9); None derives it
      from the tick size, multiplier, lot size, slippage and fees (at least cents; see
      `money`);
    - `lot_size`: the instrument's lot; every quantity is a whole number of lots (`maxpos`, in
      units, counts as the whole lots within it) and the engine counts quantities in lots.
    """

    maxpos: Positive | PositiveMoney | None = None
    maxloss: PositiveMoney = 1000.0
    maxorders: Positive = 50
    session_maxloss: PositiveMoney | None = None
    fee_per_unit: NonNegative = 0.0
    fee_per_order: NonNegative = 0.0
    multiplier: PositiveMoney = 1.0
    slippage_ticks: NonNegative = 0.0
    latency_ticks: NonNegativeInt = 0
    latency_ns: NonNegativeInt = 0
    end_of_day: Literal["flatten", "carry"] = "flatten"
    partial_fills: bool = False
    money_decimals: Annotated[int, Meta(ge=0, le=9)] | None = None
    lot_size: PositiveMoney = 1.0

    @property
    def operator_maxpos(self) -> int | float:
        """The operator's maxpos in units: `maxpos`, or `DEFAULT_MAXPOS` when None."""
        return DEFAULT_MAXPOS if self.maxpos is None else self.maxpos

    def validated(self) -> EngineConfig:
        """Self: a built `EngineConfig` is already valid (kept for compatibility)."""
        return self

    def __post_init__(self) -> None:
        """Raise ValueError naming the bad field and the fix (construction and decoding; the
        `Meta` bounds alone apply to decoding only, and cannot say "finite")."""
        check_fields(self)  # declared types and bounds, as decoding checks them
        # written as `not (x > 0)` so that NaN fails too
        if not (self.operator_maxpos > 0 and self.maxorders > 0 and 0 < self.maxloss < math.inf):
            raise ValueError("EngineConfig: maxpos, maxloss and maxorders must be > 0 (maxloss finite)")
        if self.session_maxloss is not None and not (0 < self.session_maxloss < math.inf):
            raise ValueError(
                f"EngineConfig: session_maxloss must be a finite number > 0 or None, got {self.session_maxloss}")
        for name in ("fee_per_unit", "fee_per_order", "slippage_ticks"):
            v = getattr(self, name)
            if not (0 <= v < math.inf):
                raise ValueError(f"EngineConfig: {name} must be >= 0 and finite, got {v}")
        if self.latency_ticks < 0 or self.latency_ns < 0:
            raise ValueError("EngineConfig: latency_ticks and latency_ns must be >= 0")
        if not (0 < self.multiplier < math.inf):
            raise ValueError(f"EngineConfig: multiplier must be a finite number > 0, got {self.multiplier}")
        try:
            check_lot(self.lot_size)
        except ValueError as exc:
            raise ValueError(f"EngineConfig: {exc}") from None
        n = lots_in(self.operator_maxpos, self.lot_size) if math.isfinite(self.operator_maxpos) else None
        if n is None or n < 1:
            raise ValueError(f"EngineConfig: maxpos={self.operator_maxpos!r} must be a whole number "
                             f"of lots, at least one (lot size {self.lot_size:g})")
        if self.money_decimals is not None and not (0 <= self.money_decimals <= 9):
            raise ValueError(
                f"EngineConfig: money_decimals must be 0..9 or None (derived), got {self.money_decimals}")
