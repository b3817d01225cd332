"""The engine: the facade that arms plans and runs them against the broker.

`Engine` owns the armed plan's evaluation (`reference.Evaluation`: its indicators, re-warmed
from the session's tick history when a plan is armed or the vectorized path left them stale,
after the run's earlier ticks they read when the engine holds them, `lookback`; with such
history a plan the vectorized path can run is warmed when the reference first takes one of its
ticks, the vectorized path reading the history as columns) and the history; the broker (`broker.Broker`, as `Engine.broker`) owns orders, position
and money, the broker step, rules firing, risk and the envelope, in the per-tick order its
module states. Both paths drive the broker through its public surface: the reference loop
(`reference.run`) and the vectorized path (`fast.run_fast`). Bounds are min(operator's
`EngineConfig`, plan's `RISK`): a plan may only tighten them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from fractions import Fraction
from typing import Literal, TypeAlias, get_args

import numpy as np

from kestrel.engine import reference
from kestrel.engine.book import Book, Carry, account_of, carry_of
from kestrel.engine.broker import Broker, RuleState
from kestrel.engine.config import EngineConfig
from kestrel.engine.fast import FastPolicy, FastStats, run_fast
from kestrel.engine.history import Tick, TickHistory, accepted, ticks_of
from kestrel.engine.ledger import Ledger, LedgerEvent
from kestrel.engine.lookback import warm_start
from kestrel.engine.money import Money
from kestrel.engine.orders import BrokerOrder, TickGrid
from kestrel.engine.plans import (PlanError, checked, clock_base_ns, fast_blocker, localized, longest_lookback,
                                  symbol_reads)
from kestrel.market.account import AccountState
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.lang import ast
from kestrel.lang.limits import DEFAULT_LIMITS, RUN_LIMITS
from kestrel.structs import check_fields

__all__ = ["ENGINE_PATHS", "Engine", "EnginePath", "RunPath", "ticks_of"]  # ticks_of lives in `history`, re-exported here

EnginePath: TypeAlias = Literal["auto", "reference"]
"""The path a session runs the engine on: `auto` (the vectorized path where the plan allows
it, the reference elsewhere) or the per-tick `reference`; both give the same ledger."""
ENGINE_PATHS: tuple[EnginePath, ...] = get_args(EnginePath)
RunPath: TypeAlias = EnginePath | Literal["fast"]
"""What `Engine.run` takes: an `EnginePath`, or `fast`, the vectorized path that refuses
(`PlanError`) a plan it does not apply to (for a caller that must know which path ran)."""

INF = math.inf


def _tick_size(value: object) -> float:
    """`value` as the float tick size every part of the engine reads: a number > 0 and finite; a
    numpy float that is not a double (float32) by its shortest decimal form, as its repr shows
    it (0.01, not the double nearest to the float32)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"tick_size must be a number, got {type(value).__name__} {value!r}")
    if isinstance(value, np.floating) and not isinstance(value, float):
        tick = float(str(value))
    else:
        tick = float(value)
    if not (0 < tick < INF):
        raise ValueError(f"tick_size must be a finite number > 0, got {value}")
    return tick


def _check_carry(carry: Carry) -> None:
    """Fail closed on a hand-built `Carry` whose fields are not their declared types (a
    numpy int quantity, a float position ...), the carry's orders included."""
    if not isinstance(carry, Carry):
        raise ValueError(f"carry must be a Carry (Engine.carry_out), got {type(carry).__name__}")
    check_fields(carry)
    for order in carry.orders:
        check_fields(order)


class Engine:
    """A sans-IO tick engine for one instrument over one session.

    `arm(plan)` supersedes the incumbent plan; `stand_down(reason)` disarms it;
    `on_ticks(batch)` advances the clock and returns the new ledger events; `run(ticks)`
    simulates a whole batch, on the vectorized path when it applies (`last_path` says which
    ran). The engine never reads the wall clock: its time is the ticks' time.
    """

    def __init__(
        self,
        config: EngineConfig,
        session: SessionSpec,
        instrument: str,
        tick_size: float,
        carry: Carry | None = None,
        history: Ticks | None = None,
    ) -> None:
        tick_size = _tick_size(tick_size)
        if carry is not None:
            _check_carry(carry)
        if history is not None and len(history) and int(history.ts[-1]) >= session.open_ns:
            raise ValueError(f"history must end before the session opens: its last tick is at {int(history.ts[-1])}, "
                             f"the session opens at {session.open_ns}; pass the run's earlier sessions' ticks")
        self.config = config  # valid: EngineConfig checks every field when built
        self.session = session
        self.instrument = instrument
        self.tick_size = tick_size
        self.grid = TickGrid(tick_size)
        self.money = Money.derive(tick_size, config.multiplier, config.slippage_ticks,
                                  config.fee_per_unit, config.fee_per_order, config.money_decimals,
                                  config.lot_size)
        self.clock_base_ns = clock_base_ns(session)
        self.ledger = Ledger()
        self.last_path: Literal["none", "reference", "fast"] = "none"
        # the session's ticks so far, and the plan's indicators computed over them
        self.history = TickHistory()
        # the run's earlier ticks of the instrument (a portfolio run looking back over the run,
        # `lookback`), all before the session; None: the engine holds the session alone
        self.before = history
        self.warm = Ticks.empty()  # the part of `before` the armed plan's indicators read
        self.indicators_stale = False  # the vectorized path moved on without feeding them
        # the plan
        self.plan: ast.Plan | None = None
        self.evaluation: reference.Evaluation | None = None
        self.fast_blocker = "no armed plan"
        self.arm_tick = 0
        self.fast_policy = FastPolicy()
        self.fast_stats = FastStats()  # how the last vectorized batch was spent
        # the other symbols a plan may read (their grid units): a portfolio run's members
        self.peers: dict[str, float] = {}
        # the broker: orders, position and money, step, fire, risk, envelope
        self.broker = Broker(self.config, session, self.grid, self.money, self.ledger, carry)

    # the broker's state, as callers read it
    @property
    def seen(self) -> int:
        """Ticks of the session processed so far."""
        return self.broker.seen

    @property
    def book(self) -> Book:
        return self.broker.book

    @property
    def orders(self) -> dict[int, BrokerOrder]:
        return self.broker.orders

    @property
    def armed(self) -> bool:
        return self.broker.armed

    @property
    def rule_states(self) -> list[RuleState]:
        return self.broker.rule_states

    @property
    def remaining(self) -> list[int]:
        """Each rule's repeats left."""
        return self.broker.remaining

    @property
    def maxpos(self) -> int | float:
        """The effective maxpos, in units."""
        return self.broker.units(self.broker.maxpos)

    @property
    def maxloss(self) -> float:
        return self.broker.maxloss

    @property
    def maxorders(self) -> int:
        return self.broker.maxorders

    @property
    def session_down(self) -> str:
        """Why the session stood down (its maxloss breached), or ""."""
        return self.broker.session_down

    @property
    def pos(self) -> int | float:
        """The position, in units."""
        return self.broker.units(self.broker.pos)

    @property
    def rpnl(self) -> float:
        return self.broker.rpnl

    @property
    def fees(self) -> float:
        return self.broker.fees

    def pnl_now(self, bid: float, ask: float) -> float:
        """The `pnl` series: rpnl - fees + upnl at the touch, exactly what maxloss measures."""
        return self.broker.pnl_now(bid, ask)

    # ------------------------------------------------------------------ public API
    def arm(self, plan: ast.Plan, at_ns: int | None = None) -> list[LedgerEvent]:
        """Arm `plan`, superseding the incumbent: its entries are disarmed and its working
        entry orders cancelled; the position and its protective orders carry over. `at_ns`
        is the instant the plan takes effect (a session's ordinal, after the last tick seen;
        default: the last tick's time): its events carry it and `FOR` counts from it.

        Only a checked plan is armed: `plan` is re-validated against the AST types (a Struct
        built in code skips msgspec's validation) and run through the language checker; a
        plan that fails either is refused (`PlanError`). The plan's RISK bounds only tighten
        the operator's (`EngineConfig`): each effective bound is the smaller of the two.

        Windows: an engine holding the session alone refuses a window longer than the session
        (it could never be defined); one holding the run's earlier ticks (`history`, a portfolio
        run looking back over the run) takes any window within the run's longest
        (`RUN_LIMITS`), undefined until the run holds enough history, and warms the plan's
        indicators of run-wide series with the history they read (`lookback.warm_start`)."""
        plan = localized(checked(plan, self.config.lot_size, DEFAULT_LIMITS if self.before is None else RUN_LIMITS),
                         self.instrument)
        others = [s for s in symbol_reads(plan) if s not in self.peers]
        if others:
            raise PlanError(
                f"plan {plan.name!r} reads {others[0]}, which this run does not hold"
                + (f" (its symbols: {', '.join([self.instrument, *sorted(self.peers)])})" if self.peers
                   else f": a session of {self.instrument} alone reads no other symbol; run a portfolio "
                        f"session whose universe holds {others[0]}"))
        if plan.instrument is not None and plan.instrument != self.instrument:
            raise PlanError(
                f"plan {plan.name!r} trades {plan.instrument} but this engine runs "
                f"{self.instrument}; arm it on an engine for that instrument"
            )
        if not plan.rules:
            raise PlanError(f"plan {plan.name!r} has no rules")
        need, call = longest_lookback(plan)
        span = self.session.length_ns
        if call is not None and self.before is None and need > span:
            raise PlanError(
                f"plan {plan.name!r}: {call.name}(...) looks back {need // (60 * NS_PER_S)}m, "
                f"longer than the session ({span // (60 * NS_PER_S)}m); the engine evaluates one "
                "session, so it could never be defined: use a window within the session"
            )
        mark = len(self.ledger)
        broker = self.broker
        evaluation = reference.Evaluation(plan, self.session, self.grid.half_ticks_per_point, self.clock_base_ns, broker,
                                          self.peers)
        before = self.before
        self.warm = (before.slice(warm_start(evaluation.calls, before, self.session.open_ns, evaluation.context()),
                                  len(before)) if before is not None else Ticks.empty())
        now = broker.now_ns if at_ns is None else max(broker.now_ns, int(at_ns))
        if broker.armed:
            broker.disarm(f"superseded by {plan.name}", ts=now)
        self.plan, self.evaluation, self.fast_blocker = plan, evaluation, fast_blocker(plan)
        self.arm_tick = broker.seen
        if len(self.warm) and not self.fast_blocker:
            # the vectorized path reads the history as columns; the reference warms its
            # indicators (`_rewarm`) only when it first takes a tick of this plan
            self.indicators_stale = True
        else:
            reference.warm(evaluation, self.history.view(), self.arm_tick, self.warm)
            self.indicators_stale = False
        broker.adopt(plan, now)
        return self.ledger.events[mark:]

    def stand_down(self, reason: str = "stand down", at_ns: int | None = None) -> list[LedgerEvent]:
        """Disarm entries and cancel working entry orders; protective exits stay live. `at_ns`
        as in `arm`."""
        mark = len(self.ledger)
        broker = self.broker
        if broker.armed:
            broker.disarm(reason, ts=broker.now_ns if at_ns is None else max(broker.now_ns, int(at_ns)))
            broker.refresh_envelope(broker.seen - 1)
        return self.ledger.events[mark:]

    def on_ticks(self, batch: Ticks) -> list[LedgerEvent]:
        """Advance over `batch` on the reference path; return the events it produced."""
        mark = len(self.ledger)
        if len(batch) == 0:
            return []
        batch = batch.canonical()
        self.accept(batch)
        first = self.broker.seen
        if self.indicators_stale:
            self._rewarm(first)
        self.history.append(batch)
        reference.run(self.broker, self.evaluation, batch, first)
        self.last_path = "reference"
        return self.ledger.events[mark:]

    def finish(self) -> list[LedgerEvent]:
        """End of data: apply the end-of-day policy at the last tick if the session close
        was not reached, and emit a final mark."""
        mark = len(self.ledger)
        k = self.broker
        if not k.closed and k.seen:
            k.close_session(Tick(k.seen - 1, k.now_ns, k.bid, k.ask, math.nan, 0.0), "end of data")
        return self.ledger.events[mark:]

    def run(self, ticks: Ticks, *, path: str = "auto", final: bool = True) -> Ledger:
        """Simulate `ticks`: `path` is a `RunPath`. The vectorized path (`fast`) applies
        when a plan is armed, its conditions read no per-tick account state (upnl, pnl; pos
        and rpnl are fine outside CROSSES) and its entry prices none at all."""
        if path not in (*ENGINE_PATHS, "fast"):
            raise ValueError(f"path must be auto, reference or fast, got {path!r}")
        ticks = ticks.canonical()
        blocker = self._fast_blocker()
        if path == "fast" and blocker:
            raise PlanError("the fast path does not apply: " + blocker)
        if path != "reference" and not blocker and len(ticks):
            self._run_fast(ticks)
            self.last_path = "fast"
        else:
            self.on_ticks(ticks)
        if final:
            self.finish()
        return self.ledger

    def check_entries(self, gate: Callable[[int, int, float, int], str] | None,
                      equity: Callable[[int], Fraction] | None = None) -> None:
        """Attach an account's check of every entry that passed the engine's own checks
        (`Broker.gate`: side, lots, reference price, tick index -> "" or the rejection's
        reason) and its equity now (`Broker.equity`, for entries sized by a share of equity),
        or detach them (None). Without a gate nothing is checked and nothing costs."""
        self.broker.gate = gate
        self.broker.equity = equity

    def fast_applies(self) -> bool:
        return self._fast_blocker() == ""

    def account(self) -> AccountState:
        """Position, average entry, PnL and working orders as of the last tick."""
        k = self.broker
        return account_of(k.book, k.orders.values(), self.grid, k.bid, k.ask, k.units)

    def carry_out(self) -> Carry | None:
        """What the next session takes over under `end_of_day="carry"`: the position, its
        exact cost basis and its live protective orders (entries never carry); None when
        flat."""
        return carry_of(self.broker.book, self.broker.orders.values())

    # ------------------------------------------------------------------ internals
    def _fast_blocker(self) -> str:
        return self.fast_blocker if self.broker.armed else "no armed plan"

    def accept(self, batch: Ticks) -> None:
        """Fail closed on a batch the session cannot take next (see `history.accepted`)."""
        accepted(batch, self.broker.now_ns if self.broker.seen else None)

    def _run_fast(self, batch: Ticks) -> None:
        assert self.plan is not None
        self.accept(batch)
        start = self.broker.seen
        self.history.append(batch)
        full = self.history.view()  # the session so far, without copying

        def hand_over(index: int) -> None:
            self.hand_over(batch, start, index)

        self.fast_stats = run_fast(self.plan, self.broker, full, start, self.session,
                                   self.arm_tick, self.grid.half_ticks_per_point, self.clock_base_ns,
                                   self.fast_policy, hand_over, self.warm)
        self.indicators_stale = not self.fast_stats.handed_over

    def hand_over(self, batch: Ticks, start: int, index: int) -> None:
        """Run session ticks index.. of `batch` (session ticks start.., already in the history)
        on the reference path, from the vectorized path's state after the tick before (the
        reference's): the indicators are re-warmed up to it, then the loop streams in chunks."""
        if index > start:
            k = index - start - 1
            self.broker.advance(index, int(batch.ts[k]), float(batch.bid[k]), float(batch.ask[k]))
        if index > start or self.indicators_stale:
            self._rewarm(index)
        reference.run(self.broker, self.evaluation, batch.slice(index - start, len(batch)), index)

    def _rewarm(self, upto: int) -> None:
        """Rebuild the plan's indicators from the session's first `upto` ticks (crosses from
        the plan's arming)."""
        assert self.plan is not None
        self.evaluation = reference.Evaluation(self.plan, self.session, self.grid.half_ticks_per_point,
                                               self.clock_base_ns, self.broker, self.peers)
        reference.warm(self.evaluation, self.history.view().slice(0, upto), self.arm_tick, self.warm)
        self.indicators_stale = False
