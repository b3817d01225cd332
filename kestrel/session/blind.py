"""Blind mode for a run: the `Blind` mapping of its data with the shipped names table.

The mapping (`kestrel.frame.blind`) is fixed by the run's whole market data, never by a
snapshot, so every briefing of the run, on every backend, reads the same aliases, session
numbers and scales; the engine, ledgers, captures and reports keep real values (a plan the
agent writes is mapped back before the loop checks it: `kestrel.session.ports`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kestrel.data.names import names_table
from kestrel.frame.blind import Blind
from kestrel.market.data import MarketData


def blind_of(data: MarketData | Sequence[MarketData]) -> Blind:
    """The blind mapping of a run over `data` (one instrument, or a universe's in order)."""
    return Blind.of([data] if isinstance(data, MarketData) else list(data), names_table())


__all__ = ["blind_of"]
