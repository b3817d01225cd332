"""The tick engine: plans evaluated per tick (the reference) or on columns (the vectorized
path), a simulated broker, risk and the ledger.

Pure, synchronous and sans-IO: `Engine.on_ticks(batch)` in, ledger events out.
"""

from kestrel.engine.book import Carry, CarriedOrder
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import ENGINE_PATHS, Engine, EnginePath, RunPath, ticks_of
from kestrel.engine.plans import PlanError
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
    "ENGINE_PATHS",
    "Armed",
    "Cancelled",
    "Carried",
    "Carry",
    "CarriedOrder",
    "Disarmed",
    "Engine",
    "EngineConfig",
    "EnginePath",
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
    "RunPath",
    "ticks_of",
]
