"""The baseline agent: a deterministic rule-based author that reads the briefing's panes.

At OPEN it writes an opening-range breakout: after the first 30 minutes, buy a break above the
rolling 30-minute high or sell a break below the 30-minute low, flat only, with a protective
stop and a target sized to the ATR of the `stats` pane and a size that risks at most
`risk_per_trade` per trade. It stands down when the spread or the volatility is out of range
or the briefing lacks what it needs; at later ordinals it keeps the incumbent plan (PASS)
unless the market has become untradeable. Single-shot: it never requests views.

Invariant: the reply is a pure function of the briefing text (same briefing, same reply).
"""

from __future__ import annotations

import math
import re
from typing import ClassVar

import msgspec

from kestrel.session.protocol import AgentReply, AuthorRequest

_QUOTE = re.compile(r"^bid (\S+) ask (\S+) spr (\S+) last (\S+)", re.MULTILINE)
_ATR = re.compile(r"^atr (\S+) rv (\S+?)%?(?:\s|$)", re.MULTILINE)
_CLOCK = re.compile(r"^CLOCK \S+ #(\d+) ", re.MULTILINE)
_SESSION = re.compile(r" session \S+ (\d{2}):(\d{2})-(\d{2}):(\d{2}) ")


class BaselineConfig(msgspec.Struct, frozen=True):
    """The baseline's knobs (all in the instrument's price units or account currency)."""

    risk_per_trade: float = 200.0
    stop_atr: float = 2.0
    target_atr: float = 3.0
    max_spread_pct: float = 0.10
    max_rv_pct: float = 80.0
    min_atr_pct: float = 0.005
    max_atr_pct: float = 1.0
    max_qty: int = 1000
    opening_range_min: int = 30
    flat_before_close_min: int = 15


class BaselineAgent:
    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, config: BaselineConfig = BaselineConfig()) -> None:
        self.config = config

    @property
    def agent_id(self) -> str:
        return "baseline"

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        return AgentReply(text=self.write(request.briefing))

    def write(self, briefing: str) -> str:
        """The reply for `briefing` (PLAN, STANDDOWN or PASS)."""
        c = self.config
        quote = _QUOTE.search(briefing)
        stats = _ATR.search(briefing)
        clock = _CLOCK.search(briefing)
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
        if not c.min_atr_pct <= atr_pct <= c.max_atr_pct or (rv is not None and rv > c.max_rv_pct):
            return f'STANDDOWN "volatility out of range (atr {atr_pct:.3f}% of price)"'
        if int(clock.group(1)) != 0:
            return "PASS"
        decimals = _decimals(quote.group(4))
        stop = round(c.stop_atr * atr, decimals)
        target = round(c.target_atr * atr, decimals)
        step = 10.0 ** -decimals
        stop = max(stop, step)
        target = max(target, step)
        qty = min(c.max_qty, int(math.floor(c.risk_per_trade / stop)))
        if qty < 1:
            return 'STANDDOWN "a single unit risks more than the per-trade budget"'
        maxloss = round(2.0 * c.risk_per_trade, 2)
        fmt = f"{{:.{decimals}f}}"
        s, t = fmt.format(stop), fmt.format(target)
        spr = fmt.format(max(spread * 3.0, step * 2))
        start, until = self._window(briefing)
        guard = f"time >= {start} AND pos == 0 AND spread <= {spr}"
        return (
            f"PLAN orb UNTIL {until} RISK maxpos {qty} maxloss {maxloss:g}\n"
            f"WHEN {guard} AND last > high(30m): BUY {qty} MKT STOP -{s} TARGET +{t}\n"
            f"WHEN {guard} AND last < low(30m): SELL {qty} MKT STOP +{s} TARGET -{t}\n"
        )


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


def _decimals(price_text: str) -> int:
    return len(price_text.split(".")[1]) if "." in price_text else 0


__all__ = ["BaselineAgent", "BaselineConfig"]
