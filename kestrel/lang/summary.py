"""The reply-grammar summary rendered into every briefing's kernel pane.

Kept under 120 o200k_base tokens (asserted by the tests when quicktok is installed); every
line is itself valid Kestrel shape, so a model can copy from it. The full reference is
docs/language.md.
"""

from __future__ import annotations

GRAMMAR_SUMMARY: str = """\
One statement:
PLAN name UNTIL 15:45 RISK maxpos 200 maxloss 400
WHEN cond: BUY|SELL 100 MKT|LMT px STOP -0.5% TARGET +1% TRAIL 0.3% TTL 20m; FLAT; CANCEL
cond: last ask vwap pos pnl time high(30m) chg(5m) sma(last,20) atr(14) < > CROSSES ABOVE AND OR NOT
VIEW name: pane, pane(args) | STANDDOWN "why" | PASS"""

__all__ = ["GRAMMAR_SUMMARY"]
