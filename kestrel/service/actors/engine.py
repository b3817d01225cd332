"""`EngineActor`: wraps the sans-IO engine for one instrument, one session at a time.

It takes tick batches from the feed, terminal turns from the bus (topic `turns`), and answers
account and sync queries from the driver. Each batch runs through `kestrel.session.runner`'s
`advance` on the configured engine path (`auto`: the fast path where it applies; `reference`:
per tick), exactly as `run_session` runs its segments. Every non-empty batch of ledger events it produces
is published on the bus topic `ledger`. Messages are msgspec Structs, so they could cross a
process boundary unchanged (tick columns travel as raw little-endian bytes).
"""

from __future__ import annotations

from typing import assert_never

import msgspec
import numpy as np

from kestrel_actors.actor import Actor
from kestrel.engine.book import Carry
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import Engine, EnginePath
from kestrel.engine.ledger import LedgerEvent
from kestrel.market.account import AccountState
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast
from kestrel.session.capture import CapturedTurn
from kestrel.session.runner import advance, apply_turn, path_tally
from kestrel.session.schedule import ordinal_time_ns

TURNS_TOPIC = "turns"
LEDGER_TOPIC = "ledger"


class TickBatch(msgspec.Struct, frozen=True, tag="ticks"):
    """A columnar batch of ticks: each column is the raw bytes of a float64/int64 array."""

    ts: bytes
    bid: bytes
    ask: bytes
    last: bytes
    size: bytes

    @classmethod
    def of(cls, t: Ticks) -> TickBatch:
        return cls(t.ts.tobytes(), t.bid.tobytes(), t.ask.tobytes(), t.last.tobytes(), t.size.tobytes())

    def ticks(self) -> Ticks:
        f = np.float64
        return Ticks(
            np.frombuffer(self.ts, dtype=np.int64),
            np.frombuffer(self.bid, dtype=f),
            np.frombuffer(self.ask, dtype=f),
            np.frombuffer(self.last, dtype=f),
            np.frombuffer(self.size, dtype=f),
        )


class StartDay(msgspec.Struct, frozen=True, tag="start_day"):
    session: SessionSpec


class AccountQuery(msgspec.Struct, frozen=True, tag="account"):
    """The account, and the ledger's events from index `since` on (answered `AccountView`)."""

    since: int = 0


class AccountView(msgspec.Struct, frozen=True):
    """The engine's account and the ledger events the driver has not read yet."""

    state: AccountState
    events: list[LedgerEvent]


class Sync(msgspec.Struct, frozen=True, tag="sync"):
    """Answered once everything sent to the engine before it is handled."""


class ArmAt(msgspec.Struct, frozen=True, tag="arm_at"):
    """The next turn takes effect at `at_ns`, later than its ordinal's time (an arm latency);
    answered once recorded, so it is in place before the turn arrives on the bus."""

    at_ns: int


class ArmReport(msgspec.Struct, frozen=True):
    """The engine's state after the last turn: what was done and the incumbent plan."""

    armed: str
    incumbent: ast.Plan | None


class CloseDay(msgspec.Struct, frozen=True, tag="close_day"):
    pass


class DayLedger(msgspec.Struct, frozen=True):
    """The finished day's canonical ledger, the ticks each engine path ran and what the next
    session opens with (`end_of_day="carry"`)."""

    jsonl: bytes
    engine_ticks: dict[str, int]
    carry: Carry | None = None


class LedgerBatch(msgspec.Struct, frozen=True):
    events: list[LedgerEvent]


EngineMessage = TickBatch | StartDay | AccountQuery | Sync | CloseDay | CapturedTurn | ArmAt


class EngineActor(Actor[EngineMessage]):
    def __init__(self, config: EngineConfig, symbol: str, tick_size: float, path: EnginePath = "auto") -> None:
        self._config = config
        self._symbol = symbol
        self._tick_size = tick_size
        self._path = path
        self._tally = path_tally()
        self._engine: Engine | None = None
        self._incumbent: ast.Plan | None = None
        self._armed = "none"
        self._arm_at: int | None = None

    def _current(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("EngineActor: no session started (send StartDay first)")
        return self._engine

    async def _publish(self, events: list[LedgerEvent]) -> None:
        if events:
            await self.ctx.system.bus.publish(LEDGER_TOPIC, LedgerBatch(events))

    async def receive(self, message: EngineMessage) -> object:
        if isinstance(message, TickBatch):
            await self._publish(advance(self._current(), message.ticks(), self._path, self._tally))
            return None
        if isinstance(message, ArmAt):
            self._arm_at = message.at_ns
            return None
        if isinstance(message, CapturedTurn):
            engine = self._current()
            mark = len(engine.ledger)
            at = ordinal_time_ns(engine.session, message.ordinal) if self._arm_at is None else self._arm_at
            self._arm_at = None
            self._incumbent, self._armed = apply_turn(engine, message.turn, self._incumbent, at)
            await self._publish(engine.ledger.events[mark:])
            return None
        if isinstance(message, StartDay):
            # a carried position (end_of_day="carry") opens the next session's engine
            carry = self._engine.carry_out() if self._engine is not None else None
            self._engine = Engine(self._config, message.session, self._symbol, self._tick_size, carry)
            self._incumbent, self._armed = None, "none"
            self._tally = path_tally()
            return None
        if isinstance(message, AccountQuery):
            engine = self._current()
            return AccountView(engine.account(), engine.ledger.events[message.since:])
        if isinstance(message, Sync):
            return ArmReport(self._armed, self._incumbent)
        if isinstance(message, CloseDay):
            engine = self._current()
            await self._publish(engine.finish())
            return DayLedger(engine.ledger.to_jsonl(), dict(self._tally), engine.carry_out())
        assert_never(message)


__all__ = [
    "LEDGER_TOPIC",
    "TURNS_TOPIC",
    "AccountQuery",
    "AccountView",
    "ArmReport",
    "DayLedger",
    "EngineActor",
    "EngineMessage",
    "CloseDay",
    "LedgerBatch",
    "StartDay",
    "Sync",
    "TickBatch",
]
