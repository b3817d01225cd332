"""The baseline agent: a deterministic rule-based author that reads the briefing's panes.

At OPEN it writes an opening-range breakout: after the first 30 minutes, buy a break above the
rolling 30-minute high or sell a break below the 30-minute low, flat only, with a protective
stop and a target sized to the ATR of the `stats` pane, never inside the spread: both sit at
least `min_bracket_spreads` times the widest spread the plan may enter at (its `spread <=`
guard, `max_entry_spreads` times the current spread) beyond the entry side's price, so a buy
filled at the ask is never stopped out by the bid it already sees. It sizes by risk in the
instrument's units (the request's `Instrument`: tick size, contract multiplier, minimum lot),
so the same configuration is sensible on equities, FX, crypto and futures alike: the plan's
loss bound is `maxloss`, one trade risks `risk_fraction` of it at the stop (qty = floor(
risk_fraction * maxloss / (stop distance * multiplier)), rounded down to whole lots, capped by
`maxpos`; both bounds are capped by the operator's `AuthorRequest.limits`, which the engine
enforces), and when a single lot already risks more than that it stands down. It stands down when the spread or the volatility is out of range
or the briefing lacks what it needs; at later ordinals it keeps the incumbent plan (PASS)
unless the market has become untradeable. Single-shot: it never requests views.

Invariant: the reply is a pure function of the briefing text (same briefing, same reply).
"""

from __future__ import annotations

import math
import re
import msgspec

from kestrel.agents.base import SingleShotAgent
from kestrel.market.instrument import Instrument, lots_floor, qty_text, units_of
from kestrel.session.protocol import AgentReply, AuthorRequest
from kestrel.session.risk import RiskBounds

_NO_TICKS = re.compile(r"^QUOTE \S+ no ticks yet", re.MULTILINE)
_CUTOFF = re.compile(r"^CLOCK \S+ #\d+ (\S+) cutoff (\S+)", re.MULTILINE)
_QUOTE = re.compile(r"^bid (\S+) ask (\S+) spr (\S+) last (\S+)", re.MULTILINE)
_ATR = re.compile(r"^atr (\S+) rv (\S+?)%?(?:\s|$)", re.MULTILINE)
_CLOCK = re.compile(r"^CLOCK \S+ #(\d+) ", re.MULTILINE)
_SESSION = re.compile(r" session \S+ (\d{2}):(\d{2})-(\d{2}):(\d{2}) ")


class BaselineConfig(msgspec.Struct, frozen=True):
    """The baseline's knobs (all in the instrument's price units or account currency)."""

    maxloss: float = 400.0
    risk_fraction: float = 0.5
    maxpos: int | float = 1_000_000
    stop_atr: float = 2.0
    target_atr: float = 3.0
    max_spread_pct: float = 0.10
    max_rv_pct: float = 80.0
    min_atr_pct: float = 0.005
    max_atr_pct: float = 1.0
    opening_range_min: int = 30
    flat_before_close_min: int = 15
    max_entry_spreads: float = 3.0
    min_bracket_spreads: float = 2.0

    def __post_init__(self) -> None:
        if not (self.maxloss > 0 and 0 < self.risk_fraction <= 1 and self.maxpos >= 1):
            raise ValueError(
                "BaselineConfig: maxloss must be > 0, risk_fraction in (0, 1] and maxpos >= 1, got "
                f"maxloss={self.maxloss}, risk_fraction={self.risk_fraction}, maxpos={self.maxpos}"
            )
        if not (self.stop_atr > 0 and self.target_atr > 0):
            raise ValueError("BaselineConfig: stop_atr and target_atr must be > 0")
        if not (self.max_entry_spreads >= 1 and self.min_bracket_spreads > 1):
            raise ValueError(
                "BaselineConfig: max_entry_spreads must be >= 1 and min_bracket_spreads > 1 (a "
                "stop within one spread of the entry is hit by the quote it enters at), got "
                f"max_entry_spreads={self.max_entry_spreads}, "
                f"min_bracket_spreads={self.min_bracket_spreads}"
            )


class BaselineAgent(SingleShotAgent):
    """`instrument` is the default for requests that carry none (the session runtime always
    sends the data's instrument)."""

    def __init__(
        self, config: BaselineConfig = BaselineConfig(), instrument: Instrument | None = None
    ) -> None:
        super().__init__("baseline")
        self.config = config
        self.instrument = instrument

    def author(self, request: AuthorRequest) -> AgentReply:
        instrument = request.instrument if request.instrument is not None else self.instrument
        return AgentReply(text=self.write(request.briefing, instrument, request.limits))

    def write(self, briefing: str, instrument: Instrument | None = None,
              limits: RiskBounds | None = None) -> str:
        """The reply for `briefing` (PLAN, STANDDOWN or PASS); sized in `instrument`'s units
        (one unit, multiplier 1 and the quote's precision as the tick when None) and within
        the operator's `limits` (the engine enforces min(operator, plan))."""
        c = self.config
        if limits is not None:
            c = msgspec.structs.replace(c, maxpos=min(c.maxpos, limits.maxpos),
                                        maxloss=min(c.maxloss, limits.maxloss))
        quote = _QUOTE.search(briefing)
        stats = _ATR.search(briefing)
        clock = _CLOCK.search(briefing)
        if quote is None and _NO_TICKS.search(briefing):
            return f'STANDDOWN "{self._no_data(briefing)}"'
        if quote is None or stats is None or clock is None:
            return 'STANDDOWN "briefing lacks the quote, stats or clock pane"'
        try:
            bid, ask, spread, last = (float(quote.group(i)) for i in range(1, 5))
            atr = float(stats.group(1))
        except ValueError:
            return 'STANDDOWN "not enough history for an ATR"'
        rv = _float_or_none(stats.group(2))
        if not (last > 0 and atr > 0 and ask >= bid):
            return 'STANDDOWN "no usable quote"'
        spread_pct = 100.0 * spread / last
        if spread_pct > c.max_spread_pct:
            return f'STANDDOWN "spread {spread_pct:.3f}% too wide (max {c.max_spread_pct:g}%)"'
        atr_pct = 100.0 * atr / last
        if not c.min_atr_pct <= atr_pct <= c.max_atr_pct:
            return (
                f'STANDDOWN "volatility out of range (atr {atr_pct:.3f}% of price, allowed '
                f'{c.min_atr_pct:g}-{c.max_atr_pct:g}%)"'
            )
        if rv is not None and rv > c.max_rv_pct:
            return f'STANDDOWN "volatility out of range (realized vol {rv:g}% over {c.max_rv_pct:g}%)"'
        if int(clock.group(1)) != 0:
            return "PASS"
        decimals = _decimals(quote.group(4))
        tick = instrument.tick_size if instrument is not None else 10.0 ** -decimals
        multiplier = instrument.multiplier if instrument is not None else 1.0
        # sized in whole lots: the smallest order (`min_qty` lots of the lot size; the operator's
        # lot size when the limits carry one) is the step
        lot_size = limits.lot_size if limits is not None and limits.lot_size != 1 else (
            instrument.lot_size if instrument is not None else 1)
        min_lots = instrument.min_qty if instrument is not None else 1
        # the widest spread the plan enters at, and the brackets' floor beyond the entry side
        entry_spread = max(spread * c.max_entry_spreads, tick * 2)
        floor = _ticks_up(c.min_bracket_spreads * entry_spread, tick)
        stop = max(_ticks(c.stop_atr * atr, tick), tick, floor)
        target = max(_ticks(c.target_atr * atr, tick), tick, floor)
        risk = c.risk_fraction * c.maxloss
        per_unit = stop * multiplier
        step = units_of(min_lots, lot_size)  # the smallest order, in units
        cap = lots_floor(c.maxpos, lot_size)  # (already within the limits)
        lots = min(cap, int(math.floor(risk / (per_unit * lot_size) * (1.0 + 1e-12))))
        lots = lots // min_lots * min_lots
        if lots < min_lots:
            one = "unit" if step == 1 else f"lot of {qty_text(step, lot_size)}"
            return (
                f'STANDDOWN "a single {one} risks {round(per_unit * step, 10):g} at the stop, more '
                f'than the per-trade budget {risk:g}"'
            )
        qty = qty_text(units_of(lots, lot_size), lot_size)
        maxloss = round(c.maxloss, 2)
        fmt = f"{{:.{decimals}f}}"
        s, t = fmt.format(stop), fmt.format(target)
        spr = fmt.format(entry_spread)
        start, until = self._window(briefing)
        guard = f"time >= {start} AND pos == 0 AND spread <= {spr}"
        return (
            f"PLAN orb UNTIL {until} RISK maxpos {qty} maxloss {maxloss:g}\n"
            f"WHEN {guard} AND last > high(30m): BUY {qty} MKT STOP -{s} TARGET +{t}\n"
            f"WHEN {guard} AND last < low(30m): SELL {qty} MKT STOP +{s} TARGET -{t}\n"
        )


    def _no_data(self, briefing: str) -> str:
        """The reason when the snapshot holds no tick at all: `no market data before the
        17:00 cutoff (snapshot at 16:55:00)` (the ordinal's time: the session open for OPEN)."""
        cut = _CUTOFF.search(briefing)
        if cut is None:
            return "no market data before the cutoff"
        label, frozen = cut.group(1), cut.group(2)
        at = label
        if label == "OPEN":
            m = _SESSION.search(briefing)
            at = "the open" if m is None else f"{m.group(1)}:{m.group(2)}"
        return f"no market data before the {at} cutoff (snapshot at {frozen})"

    def _window(self, briefing: str) -> tuple[str, str]:
        """Entries from the end of the opening range to a little before the close, read from
        the CLOCK pane's session line (09:30-16:00 when absent)."""
        m = _SESSION.search(briefing)
        open_min, close_min = (570, 960) if m is None else (
            int(m.group(1)) * 60 + int(m.group(2)), int(m.group(3)) * 60 + int(m.group(4))
        )
        if close_min <= open_min:
            close_min += 1440
        start = (open_min + self.config.opening_range_min) % 1440
        until = (close_min - self.config.flat_before_close_min) % 1440
        return f"{start // 60:02d}:{start % 60:02d}", f"{until // 60:02d}:{until % 60:02d}"


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _ticks(x: float, tick: float) -> float:
    """`x` rounded to the nearest multiple of `tick`."""
    return round(x / tick) * tick


def _ticks_up(x: float, tick: float) -> float:
    """`x` rounded up to a multiple of `tick` (never below `x` beyond float noise)."""
    return math.ceil(x / tick - 1e-9) * tick


def _decimals(price_text: str) -> int:
    return len(price_text.split(".")[1]) if "." in price_text else 0


__all__ = ["BaselineAgent", "BaselineConfig"]
