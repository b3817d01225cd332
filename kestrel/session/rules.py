"""The rules of the game from the engine: the run's terms and the broker's notices.

- `terms_of(config)`: the operator's bounds and the fill friction of an `EngineConfig` as the
  `Terms` every briefing states (the RULES kernel pane, `kestrel.frame.rules`);
- `notices_of(events, own)`: the ledger events an agent must hear about at its next turn, as
  `Notice`s: every order the broker rejected (`OrderRejected`, its rule counted from 1 as the
  plan is written) and every disarm the agent did not ask for (`Disarmed`, except those whose
  reason is in `own`: the runtime's record of the agent's own stand-downs and supersedes).

Pure: the same events give the same notices, in ledger order.
"""

from __future__ import annotations

from collections.abc import Iterable

from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Disarmed, LedgerEvent, OrderRejected
from kestrel.market.account import Notice
from kestrel.market.terms import Bounds, Friction, Terms


def terms_of(config: EngineConfig) -> Terms:
    """The terms of a run on `config`."""
    return Terms(
        bounds=Bounds(maxpos=config.operator_maxpos, maxloss=config.maxloss, maxorders=config.maxorders,
                      session_maxloss=config.session_maxloss),
        friction=Friction(slippage_ticks=config.slippage_ticks, latency_ticks=config.latency_ticks,
                          latency_ms=config.latency_ns / 1_000_000, fee_per_unit=config.fee_per_unit,
                          fee_per_order=config.fee_per_order, end_of_day=config.end_of_day,
                          partial_fills=config.partial_fills),
    )


def superseded(name: str) -> str:
    """The engine's disarm reason when a plan named `name` supersedes the incumbent."""
    return f"superseded by {name}"


def notices_of(events: Iterable[LedgerEvent], own: Iterable[str] = ()) -> tuple[Notice, ...]:
    """The rejections and the disarms not in `own` among `events` (see the module docstring)."""
    mine = set(own)
    out: list[Notice] = []
    for e in events:
        if isinstance(e, OrderRejected):
            out.append(Notice("rejected", e.ts, e.plan, e.reason, e.rule + 1))
        elif isinstance(e, Disarmed) and e.reason not in mine:
            out.append(Notice("disarmed", e.ts, e.plan, e.reason))
    return tuple(out)


__all__ = ["notices_of", "superseded", "terms_of"]
