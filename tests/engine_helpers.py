"""Shared helpers for the engine tests: tiny sessions and hand-written tick sequences."""

from __future__ import annotations

import datetime as dt

from kestrel.engine import Engine, EngineConfig, Ledger, ticks_of
from kestrel.engine.ledger import Cancelled, Disarmed, Filled, OrderPlaced
from kestrel.market.session import SessionSpec
from kestrel.lang import Plan, parse

SESSION = SessionSpec.us_equity(dt.date(2024, 4, 8))
T0 = SESSION.open_ns
S = 1_000_000_000


def plan(text: str, lot: float = 1) -> Plan:
    """`text` parsed and checked for an instrument of lot size `lot`."""
    p = parse(text, lot=lot)
    assert isinstance(p, Plan)
    return p


def quotes(*pairs: tuple[float, float], step_s: float = 1.0) -> list[tuple[int, float, float]]:
    """(bid, ask) pairs one `step_s` apart from the open."""
    return [(T0 + int(k * step_s * S), b, a) for k, (b, a) in enumerate(pairs)]


def engine(cfg: EngineConfig | None = None, tick_size: float = 0.25) -> Engine:
    return Engine(cfg or EngineConfig(), SESSION, "TEST", tick_size)


def run(text: str, rows: list[tuple[int, float, float]] | list[tuple[int, float, float, float, float]],
        cfg: EngineConfig | None = None, *, final: bool = False, path: str = "reference") -> Engine:
    e = engine(cfg)
    e.arm(plan(text))
    e.run(ticks_of(rows), path=path, final=final)
    return e


def fills(ledger: Ledger) -> list[tuple[int, str, int | float, float]]:
    return [(f.tick, f.side, f.qty, f.price) for f in ledger.events if isinstance(f, Filled)]


def placed(ledger: Ledger) -> list[OrderPlaced]:
    return [o for o in ledger.events if isinstance(o, OrderPlaced)]


def cancels(ledger: Ledger) -> list[tuple[int, int, str]]:
    return [(c.tick, c.id, c.reason) for c in ledger.events if isinstance(c, Cancelled)]


def disarms(ledger: Ledger) -> list[tuple[int, str]]:
    return [(d.tick, d.reason) for d in ledger.events if isinstance(d, Disarmed)]
