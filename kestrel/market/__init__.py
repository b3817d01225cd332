"""The market model: columnar ticks, bars derived from them, trading sessions and their
exchange calendars, instruments, multi-session market data and the account state.

It sits below the loaders (`kestrel.data`), the frame (`kestrel.frame`) and the engine
(`kestrel.engine`), and imports none of them.
"""

from kestrel.market.account import AccountState, WorkingOrder
from kestrel.market.bars import Bars, session_bars, time_bars
from kestrel.market.calendar import SessionKind, build_sessions
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument, decimals_for
from kestrel.market.orders import OrderType, Side
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

__all__ = [
    "AccountState",
    "Bars",
    "Instrument",
    "MarketData",
    "OrderType",
    "SessionKind",
    "SessionSpec",
    "Side",
    "Ticks",
    "WorkingOrder",
    "build_sessions",
    "decimals_for",
    "session_bars",
    "time_bars",
]
