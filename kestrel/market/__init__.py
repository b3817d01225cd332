"""The market model: columnar ticks, bars derived from them, trading sessions and their
exchange calendars, instruments, multi-session market data, universes of instruments with their
corporate actions, the account state (with the broker's notices) and the terms of trading (the
operator's bounds and the fill friction).

It sits below the loaders (`kestrel.data`), the frame (`kestrel.frame`) and the engine
(`kestrel.engine`), and imports none of them.
"""

from kestrel.market.account import AccountState, Notice, WorkingOrder
from kestrel.market.bars import Bars, session_bars, time_bars
from kestrel.market.calendar import SessionKind, build_sessions, exchange_sessions
from kestrel.market.corporate import Dividend, FactorRow, ProbableSplit, Split
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument, decimals_for
from kestrel.market.orders import OrderType, Side
from kestrel.market.session import SessionSpec
from kestrel.market.terms import DEFAULT_TERMS, Bounds, Friction, Terms
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe

__all__ = [
    "DEFAULT_TERMS",
    "AccountState",
    "Bars",
    "Bounds",
    "Dividend",
    "FactorRow",
    "Friction",
    "Instrument",
    "MarketData",
    "Member",
    "Notice",
    "OrderType",
    "ProbableSplit",
    "SessionKind",
    "SessionSpec",
    "Side",
    "Split",
    "Terms",
    "Ticks",
    "Universe",
    "WorkingOrder",
    "build_sessions",
    "decimals_for",
    "exchange_sessions",
    "session_bars",
    "time_bars",
]
