"""Blind mode for a run: the `Blind` mapping of its data with the shipped names table.

The mapping (`kestrel.frame.blind`) is fixed by the run's whole market data, never by a
snapshot, so every briefing of the run, on every backend, reads the same aliases, session
numbers and scales; the engine, ledgers, captures and reports keep real values (a plan the
agent writes is mapped back before the loop checks it: `kestrel.session.ports`).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kestrel.data.names import names_table
from kestrel.frame.blind import Blind
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.universe import Universe
from kestrel.session.protocol import PortfolioTurn
from kestrel.session.risk import RiskBounds


def blind_of(data: MarketData | Sequence[MarketData] | Universe) -> Blind:
    """The blind mapping of a run over `data` (one instrument, a list in order, or a universe:
    its members in order, its sessions numbering the days)."""
    if isinstance(data, Universe):
        return Blind.of_universe(data, names_table())
    return Blind.of([data] if isinstance(data, MarketData) else list(data), names_table())


def shown_instrument(blind: Blind, inst: Instrument) -> Instrument:
    """The instrument as an agent reads it in blind mode: the alias and the blind tick."""
    return msgspec.structs.replace(inst, symbol=blind.alias(inst.symbol),
                                   tick_size=blind.price(inst.symbol).blind_unit)


def shown_limits(blind: Blind, limits: RiskBounds, symbol: str) -> RiskBounds:
    """The operator's bounds as an agent reads them in blind mode: money and the tick rescaled."""
    m = blind.money[symbol]
    return msgspec.structs.replace(
        limits, maxloss=m.value(limits.maxloss), tick_size=blind.price(symbol).blind_unit,
        session_maxloss=m.value(limits.session_maxloss) if limits.session_maxloss is not None else None,
        fee_per_unit=m.value(limits.fee_per_unit), fee_per_order=m.value(limits.fee_per_order))


def turn_from_blind(blind: Blind, turn: PortfolioTurn) -> PortfolioTurn:
    """A universe turn the agent wrote in blind terms (plans `ON` aliases, `STANDDOWN ON` an
    alias, cross-symbol reads of aliases, prices and money in each symbol's blind scale) with
    real symbols and values: what the loop checks and assesses, and the engine arms. Exact
    (`Blind.plan_from_blind`); a word that is no alias is left as written (the language's check
    has refused it already)."""

    def real(word: str) -> str:
        return blind.real_symbol(word) or word

    plans = tuple(blind.plan_from_blind(p, real(p.instrument or "")) for p in turn.plans)
    return PortfolioTurn(plans, tuple(real(s) for s in turn.stand_down), turn.all_down)


__all__ = ["blind_of", "shown_instrument", "shown_limits", "turn_from_blind"]
