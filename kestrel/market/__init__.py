"""The market model: columnar ticks, bars derived from them, trading sessions and their
exchange calendars, instruments, multi-session market data, the account state (with the
broker's notices) and the terms of trading (the operator's bounds and the fill friction).

It sits below the loaders (`kestrel.data`), the frame (`kestrel.frame`) and the engine
(`kestrel.engine`), and imports none of them.
"""

from kestrel.market.account import AccountState, Notice, WorkingOrder
from kestrel.market.bars import Bars, session_bars, time_bars
from kestrel.market.calendar import SessionKind, build_sessions
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument, decimals_for
from kestrel.market.orders import OrderType, Side
from kestrel.market.session import SessionSpec
from kestrel.market.terms import DEFAULT_TERMS, Bounds, Friction, Terms
from kestrel.market.ticks import Ticks

__all__ = [
    "DEFAULT_TERMS",
    "AccountState",
    "Bars",
    "Bounds",
    "Friction",
    "Instrument",
    "MarketData",
    "Notice",
    "OrderType",
    "SessionKind",
    "SessionSpec",
    "Side",
    "Terms",
    "Ticks",
    "WorkingOrder",
    "build_sessions",
    "decimals_for",
    "session_bars",
    "time_bars",
]
