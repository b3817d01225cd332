"""The reply-grammar summary rendered into every briefing's kernel pane (< 120 tokens)."""

from __future__ import annotations

GRAMMAR_SUMMARY: str = """\
Reply with ONE statement:
PLAN name [ON SYM] [UNTIL hh:mm|FOR 90m] [RISK maxpos N maxloss X]
WHEN cond: BUY|SELL qty MKT|LMT px|STP px [STOP -0.5%] [TARGET +1%|@px] [TRAIL 0.3%] [TTL 20m]; FLAT; CANCEL [x3]
cond: last bid ask mid spread vwap open pos pnl time, high(30m) low(30m) chg(5m) sma(last,20) ema(last,50) atr(14), + - * /, < > ==, CROSSES ABOVE|BELOW, AND OR NOT
VIEW name: pane, pane(args) [BUDGET n] | STANDDOWN "why" | PASS"""

__all__ = ["GRAMMAR_SUMMARY"]
