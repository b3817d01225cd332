"""The checks of a read of another symbol (`SPY.last`, `SPY.chg(1d)`): the symbol is a member of
the session, the read is one of its market series or indicators, and a Price it gives belongs to
that symbol: prices of two symbols never meet in one comparison or sum (`same_owner`)."""

from __future__ import annotations

import re

from kestrel.lang.ast import Arith, Call, Expr, Neg, Series, SymbolRead, children, walk
from kestrel.lang.calls import CallChecks, constant, did_you_mean
from kestrel.lang.functions import Indicator
from kestrel.lang.registry import DEFINITIONS, SERIES, ValueType

SYMBOL_RE = re.compile(r"[A-Z][A-Z0-9._/-]*\Z")
# what another symbol offers a plan: its market series (not the account's, not the clock)
FOREIGN_SERIES: tuple[str, ...] = tuple(name for name in SERIES if name not in ("pos", "upnl", "rpnl", "pnl", "time"))


class SymbolReadChecks(CallChecks):
    """The symbol-read checks; `symbols` are the session's members (None: any symbol), and
    `instrument` the symbol of the plan being checked (None outside a plan)."""

    symbols: tuple[str, ...] | None
    instrument: str | None

    def symbol_read(self, expr: SymbolRead, depth: int) -> ValueType | None:
        sym, read = expr.symbol, expr.read
        if not SYMBOL_RE.match(sym) or len(sym) > self.lim.max_identifier_chars:
            self.err(expr, "bad-symbol", f"`{sym}` is not an instrument symbol",
                     hint="symbols are upper case, e.g. SPY.last", field="symbol")
            return None
        if self.symbols is not None and sym not in self.symbols:
            if len(self.symbols) == 1:
                self.err(expr, "unknown-symbol",
                         f"this session trades {self.symbols[0]} alone; {sym} is not in it",
                         hint=f"read {self.symbols[0]}'s own series without a prefix (last, chg(1d)), "
                              f"or run a portfolio session whose universe holds {sym}", field="symbol")
            else:
                near = did_you_mean(sym, self.symbols)
                self.err(expr, "unknown-symbol",
                         f"{sym} is not in the universe ({', '.join(self.symbols)})",
                         hint=near or "read a member of the universe, e.g. "
                                      f"{self.symbols[0]}.chg(1d)", field="symbol")
            return None
        if isinstance(read, Series) and read.name in SERIES and read.name not in FOREIGN_SERIES:
            self.err(expr, "not-foreign", f"`{sym}.{read.name}` is not a market series of {sym}",
                     hint="another symbol offers its market series (" + " ".join(FOREIGN_SERIES)
                          + ") and functions, e.g. " + f"{sym}.chg(1d); the account is the plan's own")
            return None
        if isinstance(read, Call) and read.name in DEFINITIONS and not issubclass(DEFINITIONS[read.name], Indicator):
            self.err(expr, "not-foreign", f"`{read.name}` is an operation, not a series of {sym}",
                     hint=f"apply it outside the read: {read.name}({sym}.chg(1d))")
            return None
        if isinstance(read, Call) and any(isinstance(x, SymbolRead) for arg in read.args for x in walk(arg)):
            self.err(expr, "not-foreign", f"the arguments of `{sym}.{read.name}` are {sym}'s own",
                     hint=f"write {sym}.{read.name}(mid, 20) for {sym}'s mid")
            return None
        return self.expr(read, depth + 1)

    def owner(self, expr: Expr) -> str:
        """The symbol whose price a Price-typed `expr` is ("" for the plan's own)."""
        if isinstance(expr, SymbolRead):
            return "" if expr.symbol == self.instrument else expr.symbol
        if isinstance(expr, Arith | Neg) or (isinstance(expr, Call) and expr.name in DEFINITIONS
                                             and not issubclass(DEFINITIONS[expr.name], Indicator)):
            for child in children(expr):
                got = self.owner(child)
                if got:
                    return got
        return ""

    def same_owner(self, expr: Expr, left: Expr, right: Expr, what: str, field: str | None) -> bool:
        """False (reported) when `left` and `right` are prices of different symbols."""
        a, b = self.owner(left), self.owner(right)
        if a == b or constant(left) or constant(right):
            return True
        own = self.instrument or "the plan's symbol"
        self.err(expr, "type", f"cannot {what} a Price of {a or own} and a Price of {b or own}",
                 hint="prices of two symbols never meet: compare each with its own "
                      f"({b or a}.last > {b or a}.vwap AND last > vwap), or compare their changes "
                      f"(chg(1d) > {b or a}.chg(1d)) or a ratio (last / {b or a}.last)", field=field)
        return False
