"""The tick engine: compiled plans, per-tick evaluation, simulated broker, ledger, risk.

Pure, synchronous and sans-IO: `Engine.on_ticks(batch)` in, ledger events out.
"""

from kestrel.engine import native  # first: it picks compiled or pure modules (see there)
from kestrel.engine.book import Carry, CarriedOrder
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import Engine, ticks_of
from kestrel.engine.indicators import PlanError
from kestrel.engine.ledger import (
    Armed,
    Cancelled,
    Carried,
    Disarmed,
    Filled,
    Fired,
    Ledger,
    LedgerEvent,
    LedgerSummary,
    Mark,
    OrderPlaced,
    OrderRejected,
    PositionChanged,
)

__all__ = [
    "Armed",
    "Cancelled",
    "Carried",
    "Carry",
    "CarriedOrder",
    "Disarmed",
    "Engine",
    "EngineConfig",
    "Filled",
    "Fired",
    "Ledger",
    "LedgerEvent",
    "LedgerSummary",
    "Mark",
    "OrderPlaced",
    "OrderRejected",
    "PlanError",
    "PositionChanged",
    "ticks_of",
]
