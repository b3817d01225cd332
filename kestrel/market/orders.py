"""The vocabulary of orders, defined once for the language, the engine, the ledger and the
account: which side an order is on and what kind of order it is."""

from __future__ import annotations

from typing import Literal, TypeAlias

Side: TypeAlias = Literal["buy", "sell"]
"""`buy` adds to a long position (or covers a short), `sell` the reverse."""

OrderType: TypeAlias = Literal["mkt", "lmt", "stp"]
"""`mkt` fills at the touch, `lmt` at its price or better, `stp` triggers at its price and then
fills as a market order."""
