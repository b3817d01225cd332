"""The engine: the facade that arms compiled plans and runs them against the broker kernel.

`Engine` owns the plan's compiled code, the session's tick history and the indicator state
(`indicator_state`, re-warmed from the history when a plan is armed or the fast path left
it stale); the broker kernel (`broker.Broker`, as `Engine.broker`) owns orders, position and
money, the broker step, rules firing, risk and the envelope, in the per-tick order its
module states. Both paths drive the kernel through its public surface: the generated loop
(`codegen`) and the fast path (`fast`). Bounds are min(operator's `EngineConfig`, plan's
`RISK`): a plan may only tighten them.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from kestrel.engine.book import Book, Carry, account_of, carry_of
from kestrel.engine.broker import Broker, RuleState
from kestrel.engine.codegen import CompiledPlan, compile_plan, spans, time_literals
from kestrel.engine.config import EngineConfig
from kestrel.engine.fast import run_fast
from kestrel.engine.policy import DEFAULT_POLICY, FastPolicy, FastStats
from kestrel.engine.indicators import PlanError, longest_lookback
from kestrel.engine.history import TickHistory, accepted, ticks_of
from kestrel.engine.money import Money
from kestrel.engine.ledger import Ledger, LedgerEvent
from kestrel.engine.orders import BrokerOrder, TickGrid
from kestrel.market.account import AccountState
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.structs import check_fields
from kestrel.engine.plans import checked, clock_base_ns, clock_seconds
from kestrel.lang import ast

__all__ = ["Engine", "ticks_of"]  # ticks_of lives in `history`, re-exported here

INF = math.inf
CHUNK = 1 << 16  # ticks held as Python objects at once on the reference path


def _tick_size(x: object) -> float:
    """`x` as the float tick size every part of the engine reads (compiled or not): a number
    > 0 and finite; a numpy float that is not a double (float32) by its shortest decimal
    form, as its repr shows it (0.01, not the double nearest to the float32)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"tick_size must be a number, got {type(x).__name__} {x!r}")
    if isinstance(x, np.floating) and not isinstance(x, float):
        value = float(str(x))
    else:
        value = float(x)
    if not (0 < value < INF):
        raise ValueError(f"tick_size must be a finite number > 0, got {x}")
    return value


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
    simulates a whole batch choosing the fast path when it applies (`last_path` says which
    ran). The engine never reads the wall clock: its time is the ticks' time.
    """

    # True: the reference loop updates windows, chg and sma per tick instead of reading fed
    # columns (`codegen.compile_plan(fed=False)`): the oracle the fed code is tested against
    per_tick = False

    def __init__(
        self,
        config: EngineConfig,
        session: SessionSpec,
        instrument: str,
        tick_size: float,
        carry: Carry | None = None,
    ) -> None:
        tick_size = _tick_size(tick_size)
        if carry is not None:
            _check_carry(carry)
        self.config = config  # valid: EngineConfig checks every field when built
        self.session = session
        self.instrument = instrument
        self.tick_size = tick_size
        self.grid = TickGrid(tick_size)
        self.money = Money.derive(tick_size, config.multiplier, config.slippage_ticks,
                                  config.fee_per_unit, config.fee_per_order, config.money_decimals)
        self.clock_base_ns = clock_base_ns(session)
        self.ledger = Ledger()
        self.last_path = "none"
        # the session's ticks so far, and the indicators computed over them
        self.history = TickHistory()
        self.indicators_stale = False  # the fast path moved on without feeding the indicators
        self.indicator_state: list[Any] = []
        # the plan
        self.compiled: CompiledPlan | None = None
        self.arm_tick = 0
        self.time_values: tuple[int, ...] = ()
        self.dense = False  # the fast path found the plan firing densely: dense loop from now on
        self.fast_policy: FastPolicy = DEFAULT_POLICY
        self.fast_stats = FastStats()  # how the last fast-path batch was spent
        self.carried_in = carry
        # the kernel: orders, position and money, step, fire, risk, envelope
        self.broker = Broker(self.config, session, self.grid, self.money, self.ledger, carry)
        self.open_ns = self.broker.open_ns
        self.close_ns = self.broker.close_ns

    # the kernel's state, as callers read it
    @property
    def seen(self) -> int:
        """Ticks of the session processed so far."""
        return self.broker.seen

    @property
    def now_ns(self) -> int:
        """The last tick's time (the session open before the first tick)."""
        return self.broker.now_ns

    @property
    def closed(self) -> bool:
        return self.broker.closed

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
    def plan_name(self) -> str:
        return self.broker.plan_name

    @property
    def rule_states(self) -> list[RuleState]:
        return self.broker.rule_states

    @property
    def remaining(self) -> list[int]:
        """Each rule's repeats left."""
        return self.broker.remaining

    @property
    def maxpos(self) -> int:
        return self.broker.maxpos

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
    def pos(self) -> int:
        return self.broker.pos

    @property
    def avg(self) -> float:
        return self.broker.avg

    @property
    def rpnl(self) -> float:
        return self.broker.rpnl

    @property
    def fees(self) -> float:
        return self.broker.fees

    def pnl_now(self, b: float, a: float) -> float:
        """The `pnl` series: rpnl - fees + upnl at the touch, exactly what maxloss measures."""
        return self.broker.pnl_now(b, a)

    def upnl_now(self, b: float, a: float) -> float:
        """The `upnl` series: unrealized PnL at the touch."""
        return self.broker.upnl_now(b, a)

    # ------------------------------------------------------------------ public API
    def arm(self, plan: ast.Plan, at_ns: int | None = None) -> list[LedgerEvent]:
        """Arm `plan`, superseding the incumbent: its entries are disarmed and its working
        entry orders cancelled; the position and its protective orders carry over. `at_ns`
        is the instant the plan takes effect (a session's ordinal, after the last tick seen;
        default: the last tick's time): its events carry it and `FOR` counts from it.

        Only a checked plan is armed: `plan` is re-validated against the AST types (a Struct
        built in code skips msgspec's validation) and run through the language checker; a
        plan that fails either is refused (`PlanError`). The plan's RISK bounds only tighten
        the operator's (`EngineConfig`): each effective bound is the smaller of the two."""
        plan = checked(plan)
        if plan.instrument is not None and plan.instrument != self.instrument:
            raise PlanError(
                f"plan {plan.name!r} trades {plan.instrument} but this engine runs "
                f"{self.instrument}; arm it on an engine for that instrument"
            )
        if not plan.rules:
            raise PlanError(f"plan {plan.name!r} has no rules")
        need, call = longest_lookback(plan)
        span = self.session.length_ns
        if call is not None and need > span:
            raise PlanError(
                f"plan {plan.name!r}: {call.name}(...) looks back {need // (60 * NS_PER_S)}m, "
                f"longer than the session ({span // (60 * NS_PER_S)}m); the engine evaluates one "
                "session, so it could never be defined: use a window within the session"
            )
        mark = len(self.ledger)
        compiled = compile_plan(plan, fed=not self.per_tick)
        broker = self.broker
        now = broker.now_ns if at_ns is None else max(broker.now_ns, int(at_ns))
        if broker.armed:
            broker.disarm(f"superseded by {plan.name}", t=now)
        self.compiled = compiled
        self.arm_tick = broker.seen
        self.time_values = tuple(
            clock_seconds(self.session, tod) for tod in time_literals(compiled))
        self._rewarm()
        self.dense = False
        broker.adopt(plan, now)
        return self.ledger.events[mark:]

    def stand_down(self, reason: str = "stand down", at_ns: int | None = None) -> list[LedgerEvent]:
        """Disarm entries and cancel working entry orders; protective exits stay live. `at_ns`
        as in `arm`."""
        mark = len(self.ledger)
        broker = self.broker
        if broker.armed:
            broker.disarm(reason, t=broker.now_ns if at_ns is None else max(broker.now_ns, int(at_ns)))
            broker.refresh_envelope(broker.seen - 1)
        return self.ledger.events[mark:]

    def on_ticks(self, batch: Ticks) -> list[LedgerEvent]:
        """Advance over `batch` on the reference path; return the events it produced."""
        mark = len(self.ledger)
        n = len(batch)
        if n == 0:
            return []
        batch = batch.canonical()
        self.accept(batch)
        if self.indicators_stale:
            self._rewarm()
        g0 = self.broker.seen
        self.history.append(batch)
        self._live_span(batch, g0)
        self.last_path = "reference"
        return self.ledger.events[mark:]

    def _live_span(self, batch: Ticks, g0: int) -> None:
        """Run the reference loop over `batch` (ticks g0.. of the session, already in the
        history) in chunks of `CHUNK` ticks: only one chunk is ever held as Python objects
        (a chunk boundary is a batch boundary, which never changes the ledger)."""
        n = len(batch)
        compiled = self.compiled
        broker = self.broker
        for lo, hi in spans(n, CHUNK):
            part = batch.slice(lo, hi)
            code = (compiled.for_chunk(hi - lo, any(broker.rule_states))
                    if compiled is not None else None)
            # memoryviews: iterating one yields the Python ints and floats `tolist` would
            tsl, bl, al = part.ts.data, part.bid.data, part.ask.data
            reads = code.reads if code is not None else ()
            ll = part.last.data if "l" in reads else part.last
            sl = part.size.data if "s" in reads else part.size
            broker.sizes, broker.sizes_base = part.size, g0 + lo
            if code is not None:
                q = code.columns(part, self.indicator_state, self.grid.units)
                code.live(broker, tsl, bl, al, ll, sl, q, g0 + lo, self.indicator_state,
                          broker.rule_states, self.consts())
            else:
                broker.run_idle(tsl, bl, al, ll, sl, g0 + lo)
            broker.advance(g0 + lo + len(tsl), tsl[-1], bl[-1], al[-1])

    def finish(self) -> list[LedgerEvent]:
        """End of data: apply the end-of-day policy at the last tick if the session close
        was not reached, and emit a final mark."""
        mark = len(self.ledger)
        k = self.broker
        if not k.closed and k.seen:
            k.close_session(k.seen - 1, k.now_ns, k.bid, k.ask, "end of data")
        return self.ledger.events[mark:]

    def run(self, ticks: Ticks, *, path: str = "auto", final: bool = True) -> Ledger:
        """Simulate `ticks`: `path` is auto | reference | fast. The fast path applies when
        a plan is armed and its conditions read no per-tick account state (upnl, pnl; pos
        and rpnl are fine outside CROSSES) and its entry prices none at all."""
        if path not in ("auto", "reference", "fast"):
            raise ValueError(f"path must be auto, reference or fast, got {path!r}")
        ticks = ticks.canonical()
        blocker = self._fast_blocker()
        if path == "fast" and blocker:
            raise PlanError("the fast path does not apply: " + blocker)
        if path != "reference" and not blocker:
            self.fast_stats = run_fast(self, ticks, self.fast_policy)
            self.last_path = "fast"
        else:
            self.on_ticks(ticks)
        if final:
            self.finish()
        return self.ledger

    def fast_applies(self) -> bool:
        return self._fast_blocker() == ""

    def account(self) -> AccountState:
        """Position, average entry, PnL and working orders as of the last tick."""
        k = self.broker
        return account_of(k.book, k.orders.values(), self.grid, k.bid, k.ask)

    def carry_out(self) -> Carry | None:
        """What the next session takes over under `end_of_day="carry"`: the position, its
        exact cost basis and its live protective orders (entries never carry); None when
        flat."""
        return carry_of(self.broker.book, self.broker.orders.values())

    # ------------------------------------------------------------------ internals
    def _fast_blocker(self) -> str:
        if self.compiled is None or not self.broker.armed:
            return "no armed plan"
        return self.compiled.fast_blocker

    def accept(self, batch: Ticks) -> None:
        """Fail closed on a batch the session cannot take next (see `history.accepted`)."""
        accepted(batch, self.broker.now_ns if self.broker.seen else None)

    def hand_over(self, batch: Ticks, start: int, i: int) -> None:
        """Run ticks i.. of `batch` (session ticks start.., already in the history) on the
        compiled loop, from the fast path's state after tick i-1 (which is the reference's):
        the indicators are re-warmed up to tick i, then the loop streams in chunks."""
        if i > start:
            self.broker.advance(i, int(batch.ts[i - start - 1]), float(batch.bid[i - start - 1]),
                          float(batch.ask[i - start - 1]))
        if i > start or self.indicators_stale:
            self._rewarm(i)
        if i - start < len(batch):
            self._live_span(batch.slice(i - start, len(batch)), i)

    def _rewarm(self, upto: int | None = None) -> None:
        """Rebuild the plan's indicator state from the session's history (its first `upto`
        ticks, default all): indicators over every tick, crosses over the ticks since the
        plan was armed."""
        assert self.compiled is not None
        self.indicator_state = self.compiled.init_state()
        h = self.history.view()
        n = len(h) if upto is None else upto
        cut = min(max(self.arm_tick, 0), n)
        for lo, hi, crosses in ((0, cut, False), (cut, n, True)):
            for c in range(lo, hi, CHUNK):  # one chunk at a time as Python objects
                part = h.slice(c, min(hi, c + CHUNK))
                code = self.compiled.for_chunk(len(part))
                fn, reads = code.warmx if crosses else code.warm, code.reads
                fn(part.ts.tolist(), part.bid.tolist(), part.ask.tolist(),
                   part.last.tolist() if "l" in reads else part.last,
                   part.size.tolist() if "s" in reads else part.size,
                   code.columns(part, self.indicator_state, self.grid.units),
                   self.indicator_state, self.consts())
        self.indicators_stale = False

    def consts(self) -> tuple[int, int, float, tuple[int, ...]]:
        """The session constants the generated code reads: the clock base (`time` counts
        seconds from it), the open, the price units of the exact indicators and the plan's
        times of day as `time` values."""
        return (self.clock_base_ns, self.open_ns, self.grid.units, self.time_values)
