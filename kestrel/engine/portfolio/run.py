"""The engine over a universe: one per-symbol `Engine` each, their ticks merged in time order,
one account across them (`funds.Funds`) and the portfolio ledger (`ledger`).

Per session (docs/engine.md "Portfolio runs" states each rule once):
- at the open, for each symbol in universe order: a position held into a split's ex-date is
  adjusted (`split` event), a dividend going ex is credited on the position held into it
  (`dividend` event), then the symbol's engine opens with its carried position and protective
  orders (`carry`, `order` events);
- the ticks of all symbols are taken in merged order: by time, at equal time in universe order
  (sorted by symbol), within a symbol in data order;
- an entry that passes the symbol's own checks is checked against the account at placement
  (`Funds.check`: the portfolio stood down, no-short, max open positions, funding, max gross);
  a failing one is an `OrderRejected` with its reason, the plan stays armed;
- after every `mark` of a symbol an `account` event; when the equity has fallen by the
  portfolio's `session_maxloss` from the session's opening equity, every plan stands down and
  every position is flattened from its symbol's next tick (the ticks run one by one then).

Paths: `reference` feeds each run of consecutive ticks of one symbol in merged order to its
engine, the account's check attached to its broker. `auto` runs each symbol's stretch on its
engine's own `auto` path with no check attached, then merges the events in merged order and
replays the account over them, checking every entry placed as the reference would have; when
every check passes and no loss limit is reached, the reference would have decided the same at
every placement, so its ledger is the reference's; else the session is rebuilt from its open and
re-run on the reference path (`last_path` says which ran). After a session whose audit failed,
the next sessions run `auto` on the reference path directly (1 after a first failure, then 2, 4,
... up to `AUDIT_BACKOFF_MAX` after failures in a row; a passing audit resets it): the same ledger,
without a fast run the reference would redo when the account binds session after session. A run while an armed plan reads
another symbol (`SPY.last`) is on the reference path: after each stretch of a symbol's ticks the
plans reading it take those ticks (`Evaluation.feed`), so a plan sees another symbol's ticks
strictly before its own in the merged order; a plan armed mid-session takes them so far. With
`PortfolioBounds.lookback = "run"` each engine opens holding its symbol's ticks of the run's
earlier sessions (`lookback.RunHistory`), which warm a plan's indicators (and its reads of other
symbols) when it is armed, a plan FOR n sessions re-armed at each open included; the broker
never sees them. Deterministic: no wall clock, no
dict-order leak (symbols in universe order everywhere).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import msgspec
import numpy as np

from kestrel.engine.book import Carry
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import ENGINE_PATHS, Engine
from kestrel.engine.portfolio.funds import ACCOUNT_EVENTS, Funds
from kestrel.engine.ledger import Filled, LedgerEvent, Mark, OrderPlaced
from kestrel.engine.lookback import RunHistory, warm_start
from kestrel.engine.money import Money
from kestrel.engine.orders import TickGrid, exact
from kestrel.engine.plans import PlanError
from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, PortfolioLedger, SplitApplied
from kestrel.market.instrument import units_of
from kestrel.market.portfolio import Holding, PortfolioBounds, PortfolioState
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import I64, Ticks
from kestrel.market.universe import Universe
from kestrel.lang import ast

NAN = math.nan
AUDIT_BACKOFF_MAX = 32  # the most sessions `auto` runs on the reference after audits failed in a row
_NO_TOUCH = (NAN, NAN)


@dataclass
class _Start:
    """What a session opened from (for a re-run on the reference path)."""

    session: SessionSpec
    carries: dict[str, Carry | None]
    funds: Funds
    ledger_len: int
    last_touch: dict[str, tuple[float, float]]
    realized: dict[str, Fraction]
    fees: dict[str, Fraction]
    standing: dict[str, tuple[ast.Plan, int]]


Command = (tuple[Literal["arm"], str, ast.Plan, int | None]
           | tuple[Literal["stand"], str, str, int | None]
           | tuple[Literal["run"], int | None])


class PortfolioEngine:
    """Many books, one account (see the module docstring). `configs` maps each symbol to its
    engine's config (its multiplier and lot size: `kestrel.session.options.engine_config`);
    `bounds` are the operator's over the account.

    Use: `open_session(session)`, then `arm(symbol, plan)` / `stand_down(symbol)` and
    `run(until_ns)` in any order, then `close_session()`; `ledger` is the portfolio ledger and
    `state()` the account. `run_universe` does it for plans armed at every open."""

    def __init__(self, universe: Universe, configs: Mapping[str, EngineConfig], bounds: PortfolioBounds) -> None:
        if not len(universe):
            raise ValueError("the universe has no symbol")
        currencies = sorted({m.instrument.currency for m in universe.members})
        if len(currencies) > 1:
            raise ValueError(f"a universe trades in one currency; these symbols mix {', '.join(currencies)}: "
                             "select symbols of one currency (--symbols)")
        missing = [s for s in universe.symbols if s not in configs]
        if missing:
            raise ValueError(f"no engine config for {', '.join(missing)}")
        self.universe = universe
        self.symbols = universe.symbols
        self._members = {m.symbol: m for m in universe.members}
        self.rank = {s: k for k, s in enumerate(self.symbols)}
        self.configs = dict(configs)
        self.bounds = bounds
        self.currency = currencies[0]
        mults = {s: exact(configs[s].multiplier) for s in self.symbols}
        decimals = max(Money.derive(universe[s].data.tick_size, configs[s].multiplier, configs[s].slippage_ticks,
                                    configs[s].fee_per_unit, configs[s].fee_per_order, configs[s].money_decimals,
                                    configs[s].lot_size).decimals for s in self.symbols)
        self.funds = Funds(self.symbols, mults, bounds, decimals)
        self.ledger = PortfolioLedger()
        self.last_path: Literal["none", "reference", "fast"] = "none"
        self.paths: list[str] = []  # the path of each run
        self.engines: dict[str, Engine] = {}
        self.session: SessionSpec | None = None
        self.down = ""  # why the account stood down this session, or ""
        self._carries: dict[str, Carry | None] = {s: None for s in self.symbols}
        # each symbol's ticks of the sessions run so far: its engines' history (`lookback`)
        self._past = {s: RunHistory(self._members[s].data.ticks) for s in self.symbols}
        self._tick_off = {s: 0 for s in self.symbols}
        self._merged_off = 0
        self._last_touch: dict[str, tuple[float, float]] = {s: _NO_TOUCH for s in self.symbols}
        self._realized = {s: Fraction(0) for s in self.symbols}  # of closed sessions
        self._fees = {s: Fraction(0) for s in self.symbols}
        self._force_reference = False
        self._audit_rest = 0  # sessions still to run on the reference after a failed audit
        self._audit_backoff = 1  # how many the next failed audit sends there
        self._standing: dict[str, tuple[ast.Plan, int]] = {}  # a plan FOR n sessions: it and the sessions left
        self._log: list[Command] = []
        self._start: _Start | None = None
        self._replaying = False

    # ------------------------------------------------------------------ session
    def open_session(self, session: SessionSpec) -> None:
        """Open `session` (after the previous one closed): corporate actions on held positions,
        then every symbol's engine with its carry."""
        if self.session is not None:
            raise ValueError("close the open session first (close_session)")
        self._start = _Start(session, dict(self._carries), self.funds.copy(), len(self.ledger),
                             dict(self._last_touch), dict(self._realized), dict(self._fees), dict(self._standing))
        self._log = []
        self._force_reference = self._audit_rest > 0
        self._audit_rest = max(0, self._audit_rest - 1)
        self._open(session)

    def _open(self, session: SessionSpec) -> None:
        self.session = session
        self.down = ""
        self._msym, self._midx, self._mts, where = _merged(self.universe, session)
        n = len(self._msym)
        self._runs = np.append(np.flatnonzero(np.diff(self._msym)) + 1, n).astype(np.int64)
        self._mpos: dict[str, I64] = {}
        self._ticks: dict[str, Ticks] = {}
        self._ranges: dict[str, tuple[int, int]] = {}
        open_ns, close_ns = session.open_ns, session.close_ns
        for k, s in enumerate(self.symbols):
            self._mpos[s] = where[k]
            data = self._members[s].data.ticks
            self._ranges[s] = (data.index_at(open_ns, side="left"), data.index_at(close_ns, side="right"))
            self._ticks[s] = data.slice(*self._ranges[s])
        # the account's reads, as lists (a bisect and two list reads per touch)
        self._msym_l: list[int] = self._msym.tolist()
        self._mpos_l = {s: p.tolist() for s, p in self._mpos.items()}
        self._bid_l = {s: t.bid.tolist() for s, t in self._ticks.items()}
        self._ask_l = {s: t.ask.tolist() for s, t in self._ticks.items()}
        self._cursor = 0
        self._vkey = -1  # the merged position the account's values were last read at
        self._fed = {s: 0 for s in self.symbols}
        self._done = {s: 0 for s in self.symbols}
        self._breach = False
        self._filled: set[str] = set()  # symbols with a fill not yet marked
        day = session.date
        splits = [e for e in self.universe.splits if e.date == day]
        dividends = [e for e in self.universe.dividends if e.date == day]
        for s in self.symbols:
            carry = self._carries[s]
            for split in splits:
                if split.symbol == s and carry is not None:
                    carry = self._split(s, carry, Fraction(split.numerator, split.denominator), session)
            for div in dividends:
                if div.symbol == s and carry is not None:
                    self._dividend(s, carry, div.amount, session)
            engine = Engine(self.configs[s], session, s, self._members[s].data.tick_size, carry, self._history(s))
            self.engines[s] = engine
            self._take(s, command=True)
        units = {s: self.engines[s].grid.half_ticks_per_point for s in self.symbols}
        for s in self.symbols:  # the other members a plan may read (cross-symbol reads)
            peers = self.engines[s].peers = dict(units)
            del peers[s]
        self.funds.new_session(lambda x: self._touch(x, -1))
        for s in self.symbols:  # a plan living FOR more sessions is armed again at the open
            standing = self._standing.get(s)
            if standing is not None:
                plan, left = standing
                if left > 1:
                    self._standing[s] = (plan, left - 1)
                    try:
                        self.engines[s].arm(plan, open_ns)
                        self._feed_reads(s)
                    except PlanError:  # looking back over the session alone, a window longer than
                        del self._standing[s]  # this (half) day: the plan ends
                    self._take(s, command=True)
                else:
                    del self._standing[s]

    def _split(self, symbol: str, carry: Carry, ratio: Fraction, session: SessionSpec) -> Carry:
        """`carry` adjusted for a split of `ratio` new shares per old: the position times the
        ratio (whole lots; a fraction of a lot left over is paid in cash at the last touch
        divided by the ratio), the cost basis unchanged, protective orders' quantities times the
        ratio and their prices (and absolute trailing offsets) divided by it, on the tick grid."""
        cfg = self.configs[symbol]
        lot = exact(cfg.lot_size)
        grid = TickGrid(self.universe[symbol].data.tick_size)
        exact_lots = carry.pos * ratio
        lots = math.floor(exact_lots) if carry.pos > 0 else -math.floor(-exact_lots)
        cost = Fraction(carry.cost)
        bid, ask = self._last_touch[symbol]
        in_lieu = Fraction(0)
        if lots != exact_lots:  # cash in lieu of the fraction
            left = (exact_lots - lots) * lot
            mark = bid if carry.pos > 0 else ask
            share = cost * (1 - Fraction(lots) / exact_lots)
            cost -= share
            if mark == mark:
                in_lieu = left * exact(mark) / ratio * exact(cfg.multiplier)
                self.funds.credit(in_lieu)
        orders = tuple(
            msgspec.structs.replace(
                o, qty=int(o.qty * ratio),
                price=None if o.price is None else grid.snap_exact(exact(o.price) / ratio),
                trail_value=(o.trail_value / float(ratio) if o.trail_mode == "abs" and o.trail_value is not None
                             else o.trail_value),
                best=grid.snap_exact(exact(o.best) / ratio) if o.best else o.best)
            for o in carry.orders if int(o.qty * ratio) > 0)
        after = Carry(lots, str(cost), orders)
        self._last_touch[symbol] = (bid / float(ratio), ask / float(ratio))
        self.funds.set_pos(symbol, lots * lot)
        self.ledger.append(symbol, SplitApplied(self._tick_off[symbol], session.open_ns, float(ratio),
                                           _units(carry.pos, cfg), _units(lots, cfg), carry.avg_price,
                                           after.avg_price, self.funds.amount(in_lieu)))
        return after

    def _dividend(self, symbol: str, carry: Carry, per_share: float, session: SessionSpec) -> None:
        cfg = self.configs[symbol]
        units = carry.pos * exact(cfg.lot_size)
        amount = units * exact(per_share) * exact(cfg.multiplier)
        self.funds.credit(amount)
        self.ledger.append(symbol, DividendPaid(self._tick_off[symbol], session.open_ns, per_share, _units(carry.pos, cfg),
                                           self.funds.amount(amount)))

    def close_session(self, path: str = "auto") -> None:
        """Run the rest of the session on `path`, apply each engine's end-of-day policy
        (`finish`), and keep what carries."""
        self._need_session()
        self.run(None, path)
        for s in self.symbols:
            self.engines[s].finish()
            self._take(s, command=True)
        n = len(self._msym)
        self._account_mark(n - 1, n - 1, self.session.close_ns if self.session is not None else 0)
        self._close_books()

    def _close_books(self) -> None:
        for s in self.symbols:
            self._past[s].add(*self._ranges[s])
            e = self.engines[s]
            self._carries[s] = e.carry_out()
            self._realized[s] += e.book.realized * e.book.mult
            self._fees[s] += Fraction(e.book.fees_k, e.money.scale)
            t = self._ticks[s]
            self._tick_off[s] += len(t)
            if len(t):
                self._last_touch[s] = (float(t.bid[-1]), float(t.ask[-1]))
        self._merged_off += len(self._msym)
        self.session = None

    # ------------------------------------------------------------------ plans
    def arm(self, symbol: str, plan: ast.Plan, at_ns: int | None = None) -> None:
        """Arm `plan` on `symbol`'s engine, superseding only that symbol's incumbent."""
        self._need_session()
        engine = self._engine(symbol)
        if plan.instrument is not None and plan.instrument != symbol:
            raise PlanError(f"plan {plan.name!r} is ON {plan.instrument}, not {symbol}")
        engine.arm(plan, at_ns)  # a refused plan (PlanError) changes nothing and is not logged
        self._feed_reads(symbol)
        self._log.append(("arm", symbol, plan, at_ns))
        self._take(symbol, command=True)
        if isinstance(plan.expiry, ast.For) and plan.expiry.span.unit == "d":
            self._standing[symbol] = (plan, plan.expiry.span.value)
        else:
            self._standing.pop(symbol, None)

    def stand_down(self, symbol: str | None = None, reason: str = "stand down", at_ns: int | None = None) -> None:
        """Stand `symbol`'s plan down (every symbol's when None); protective exits stay."""
        self._need_session()
        for s in self.symbols if symbol is None else (symbol,):
            self._engine(s)
            self._log.append(("stand", s, reason, at_ns))
            self._standing.pop(s, None)
            self.engines[s].stand_down(reason, at_ns)
            self._take(s, command=True)

    # ------------------------------------------------------------------ ticks
    def run(self, until_ns: int | None = None, path: str = "auto") -> None:
        """Take the merged ticks with ts <= `until_ns` (all the session's when None) on `path`
        (`auto` or `reference`, see the module docstring)."""
        self._need_session()
        if path not in ENGINE_PATHS:
            raise ValueError(f"path must be one of {', '.join(ENGINE_PATHS)}, got {path!r}")
        self._log.append(("run", until_ns))
        end = len(self._mts) if until_ns is None else int(np.searchsorted(self._mts, until_ns, side="right"))
        if end <= self._cursor:
            return
        if (path == "reference" or self._force_reference or self.bounds.session_maxloss is not None
                or any(e.broker.sizes_by_equity() for e in self.engines.values()) or self._readers()):
            self._run_reference(end)
            self._ran("reference")
            return
        if self._run_audited(end):
            self._audit_backoff = 1
            self._ran("fast")
            return
        self._audit_rest, self._audit_backoff = self._audit_backoff, min(2 * self._audit_backoff, AUDIT_BACKOFF_MAX)
        # a check would have bound: the reference decides; rebuild the session and re-run it
        self._rerun_on_reference()
        self._ran("reference")

    # ------------------------------------------------------------------ cross-symbol reads
    def _readers(self, symbol: str | None = None) -> list[str]:
        """The symbols whose armed plan reads `symbol` (any other symbol when None), in
        universe order: they run on the reference path, fed its ticks in merged order."""
        return [r for r, e in self.engines.items() if e.broker.armed and e.plan is not None and e.evaluation
                is not None and (e.evaluation.feeds if symbol is None else symbol in e.evaluation.feeds)]

    def _history(self, symbol: str) -> Ticks | None:
        """`symbol`'s ticks of the run's earlier sessions, when plans look back over the run."""
        return self._past[symbol].ticks() if self.bounds.lookback == "run" else None

    def _feed_reads(self, symbol: str) -> None:
        """A plan armed on `symbol`: its reads of other symbols take those symbols' ticks of the
        run's earlier sessions they need (looking back over the run), then their ticks so far."""
        evaluation = self.engines[symbol].evaluation
        if evaluation is not None:
            for other, feed in evaluation.feeds.items():
                past = self._history(other)
                if past is not None:
                    # (at least its last tick: `SPY.last` is its last trade before this session's)
                    start = min(warm_start(feed.calls, past, feed.open_ns, feed.context()), max(len(past) - 1, 0))
                    evaluation.feed(other, past.slice(start, len(past)), history=True)
                evaluation.feed(other, self._ticks[other].slice(0, self._fed[other]))

    def _ran(self, path: Literal["reference", "fast"]) -> None:
        if not self._replaying:
            self.last_path = path
            self.paths.append(path)

    def _run_reference(self, end: int) -> None:
        for s in self.symbols:
            self.engines[s].check_entries(self._gate(s), self._equity(s))
        one_by_one = self.bounds.session_maxloss is not None
        runs: list[int] = self._runs.tolist()
        msym = self._msym_l
        reading: dict[str, list[str]] = {}  # per symbol, the symbols whose plan may read it (no arm in a run)
        for r, e in self.engines.items():
            for other in e.evaluation.feeds if e.evaluation is not None else ():
                reading.setdefault(other, []).append(r)
        while self._cursor < end:
            c = self._cursor
            s = self.symbols[msym[c]]
            stop = c + 1 if one_by_one else min(runs[bisect_right(runs, c)], end)
            a = self._fed[s]
            b = a + (stop - c)
            self.engines[s].on_ticks(self._ticks[s].slice(a, b))
            for r in reading.get(s, ()):  # the plans reading s take its ticks before their next own
                e = self.engines[r]
                if e.broker.armed and e.plan is not None and e.evaluation is not None:
                    e.evaluation.feed(s, self._ticks[s].slice(a, b))
            self._fed[s] = b
            self._cursor = stop
            self._take(s)
            if one_by_one and not self.down and not self._breach:
                self._check_loss(stop - 1)
            if self._breach and not self.down:
                self._liquidate()

    def _run_audited(self, end: int) -> bool:
        """Each symbol's stretch on its own path, no check attached; then the merged replay.
        False when a check would have rejected an entry or the loss limit was reached."""
        until = int(self._mts[end - 1])
        for s in self.symbols:
            e = self.engines[s]
            e.check_entries(None)
            a = self._fed[s]
            b = int(np.searchsorted(self._ticks[s].ts, until, side="right"))
            if b > a:
                e.run(self._ticks[s].slice(a, b), path="auto", final=False)
            self._fed[s] = b
        self._cursor = end
        pending: list[tuple[int, int, int, str]] = []
        for rank, s in enumerate(self.symbols):
            events = self.engines[s].ledger.events
            pos = self._mpos_l[s]
            pending.extend([(pos[events[j].tick], rank, j, s) for j in range(self._done[s], len(events))])
        pending.sort()
        engines = self.engines
        for key, _, j, s in pending:
            ev = engines[s].ledger.events[j]
            if type(ev) is OrderPlaced and ev.role == "entry":
                ref = ev.price if ev.price is not None else self._touch(s, key)[1 if ev.side == "buy" else 0]
                qty = exact(ev.qty)
                if self.funds.check(s, 1 if ev.side == "buy" else -1, qty, ref, self._touch_at(key), self.down,
                                    self._changed(key)):
                    return False
            self._consume(s, ev, key, key)
            self._done[s] = j + 1
            if self._breach:
                return False
        return True

    def _rerun_on_reference(self) -> None:
        start = self._start
        assert start is not None
        log = self._log
        self._carries = dict(start.carries)
        self.funds = start.funds.copy()
        self.ledger.truncate(start.ledger_len)
        self._last_touch = dict(start.last_touch)
        self._realized, self._fees = dict(start.realized), dict(start.fees)
        self._standing = dict(start.standing)
        self._replaying = True
        try:
            self._open(start.session)
            self._force_reference = True
            self._log = []
            for cmd in log:
                if cmd[0] == "arm":
                    self.arm(cmd[1], cmd[2], cmd[3])
                elif cmd[0] == "stand":
                    self.stand_down(cmd[1], cmd[2], cmd[3])
                else:
                    self.run(cmd[1], "reference")
        finally:
            self._replaying = False

    def _liquidate(self) -> None:
        """The portfolio's session maxloss was reached: stand every plan down and flatten."""
        loss = self.bounds.session_maxloss
        self.down = f"portfolio session maxloss {loss:g} breached: the portfolio stands down"
        for s in self.symbols:
            self.engines[s].broker.liquidate(self.down)
            self._take(s, command=True)

    # ------------------------------------------------------------------ the account
    def _gate(self, symbol: str) -> Callable[[int, int, float, int], str]:
        lot_ = exact(self.configs[symbol].lot_size)
        lot: Fraction | int = lot_.numerator if lot_.denominator == 1 else lot_
        pos = self._mpos_l[symbol]

        def gate(side: int, lots: int, price: float, index: int) -> str:
            key = pos[index]
            self._take(symbol)
            return self.funds.check(symbol, side, lots * lot, price, self._touch_at(key), self.down, self._changed(key))

        return gate

    def _changed(self, key: int) -> set[str] | None:
        """The symbols that ticked since the account's values were last read (at merged
        position `_vkey`) up to `key`; None (read every value) when `key` is before it."""
        last = self._vkey
        if key < last:
            self._vkey = key
            return None
        self._vkey = key
        if key == last:
            return set()
        symbols = self.symbols
        return {symbols[k] for k in set(self._msym_l[last + 1: key + 1])}

    def _equity(self, symbol: str) -> Callable[[int], Fraction]:
        """The account's equity at `s`'s tick `index` (for entries sized by a share of it)."""
        pos = self._mpos_l[symbol]

        def equity(index: int) -> Fraction:
            key = pos[index]
            self._take(symbol)
            return self.funds.equity(self._touch_at(key), self._changed(key))

        return equity

    def _touch_at(self, key: int) -> Callable[[str], tuple[float, float]]:
        return lambda x: self._touch(x, key)

    def _touch(self, symbol: str, key: int) -> tuple[float, float]:
        """`s`'s touch at merged position `key` of the session: its last tick at or before it,
        else the last touch of an earlier session."""
        j = bisect_right(self._mpos_l[symbol], key) - 1
        if j < 0:
            return self._last_touch[symbol]
        return self._bid_l[symbol][j], self._ask_l[symbol][j]

    def _take(self, symbol: str, command: bool = False) -> None:
        """Consume `s`'s new engine events into the account and the ledger: those of a run at
        their ticks' merged positions, those of a command (arm, stand-down, finish) at the
        merged clock."""
        events = self.engines[symbol].ledger.events
        pos = self._mpos_l[symbol]
        for j in range(self._done[symbol], len(events)):
            ev = events[j]
            if command:
                self._consume(symbol, ev, self._cursor - 1, self._cursor)
            else:
                key = pos[ev.tick]
                self._consume(symbol, ev, key, key)
        self._done[symbol] = len(events)

    def _consume(self, symbol: str, ev: LedgerEvent, key: int, tick: int) -> None:
        kind = type(ev)
        if isinstance(ev, ACCOUNT_EVENTS):
            self.funds.consume(symbol, ev, self._touch(symbol, key) if kind is OrderPlaced else _NO_TOUCH)
        off = self._tick_off[symbol]
        self.ledger.append(symbol, msgspec.structs.replace(ev, tick=ev.tick + off) if off else ev)
        if kind is Filled:
            self._filled.add(symbol)
        elif kind is Mark and symbol in self._filled:  # the mark after a fill
            self._filled.discard(symbol)
            # a command's fill (an end of data) is marked at the merged clock, with every touch so far
            ts = max(ev.ts, int(self._mts[key])) if key >= 0 and len(self._mts) else ev.ts
            self._account_mark(key, tick, ts)

    def _account_mark(self, key: int, tick: int, ts: int) -> None:
        f = self.funds
        equity, gross, net, n_open = f.marks(self._touch_at(key), self._changed(key))
        self.ledger.append(None, AccountMark(self._merged_off + max(tick, 0), ts, f.shown(f.cash_n),
                                             f.shown(equity), f.shown(gross), f.shown(net), n_open))
        self._check_loss(key, equity)

    def _check_loss(self, key: int, equity: int | None = None) -> None:
        """The portfolio's session maxloss against the equity at merged position `key`."""
        loss = self.bounds.session_maxloss
        if loss is None or self.down:
            return
        f = self.funds
        if equity is None:
            equity = f.marks(self._touch_at(key), self._changed(key))[0]
        if f.loss_reached(equity, loss):  # (equity over the account's denominator)
            self._breach = True

    def state(self) -> PortfolioState:
        """The account now: cash, equity, exposure, one holding per symbol in universe order."""
        f = self.funds
        key = self._cursor - 1 if self.session is not None else -1
        holdings: list[Holding] = []
        for s in self.symbols:
            at = self._touch(s, key) if self.session is not None else self._last_touch[s]
            e = self.engines.get(s)
            p = f.pos[s]
            value = f.value(s, at)
            realized, fees = self._realized[s], self._fees[s]
            cost = Fraction(0)
            if e is not None:
                cost = e.book.cost * e.book.mult if p else Fraction(0)
                if self.session is not None:
                    realized += e.book.realized * e.book.mult
                    fees += Fraction(e.book.fees_k, e.money.scale)
            mark = (at[0] if p > 0 else at[1]) if p else None
            holdings.append(Holding(
                s, _units_exact(p), (e.book.avg if e is not None and p else None),
                None if mark is None or mark != mark else mark, f.amount(value),
                f.amount(value - cost) if p and mark == mark else 0.0, f.amount(realized), f.amount(fees)))
        def touch(x: str) -> tuple[float, float]:
            return self._touch(x, key) if self.session is not None else self._last_touch[x]

        equity, gross, net, n_open = f.figures(touch)
        return PortfolioState(self.currency, self.bounds.capital, f.amount(f.cash), f.amount(equity),
                              f.amount(gross), f.amount(net), n_open, tuple(holdings))

    # ------------------------------------------------------------------ internals
    def _need_session(self) -> None:
        if self.session is None:
            raise ValueError("no session is open: call open_session(session) first")

    def _engine(self, symbol: str) -> Engine:
        e = self.engines.get(symbol)
        if e is None:
            raise PlanError(f"no symbol {symbol!r} in the universe ({', '.join(self.symbols)})")
        return e


def _units(lots: int, cfg: EngineConfig) -> int | float:
    return lots if cfg.lot_size == 1 else units_of(lots, cfg.lot_size)


def _units_exact(x: Fraction | int) -> int | float:
    return x.numerator if x.denominator == 1 else float(x)


def _session_ticks(ticks: Ticks, open_ns: int, close_ns: int) -> Ticks:
    """The ticks in [open, close] (as a single-symbol session takes them)."""
    return ticks.slice(ticks.index_at(open_ns, side="left"), ticks.index_at(close_ns, side="right"))


def _merged(universe: Universe, session: SessionSpec) -> tuple[I64, I64, I64, list[I64]]:
    """The session's merged order: (symbol rank, index within the symbol's session ticks, ts)
    per merged position, by (ts, rank, index); and per member the merged positions of its
    session ticks, in order."""
    ranks, idxs, tss = [], [], []
    open_ns, close_ns = session.open_ns, session.close_ns
    for k, m in enumerate(universe.members):
        t = _session_ticks(m.data.ticks, open_ns, close_ns)
        ranks.append(np.full(len(t), k, dtype=np.int64))
        idxs.append(np.arange(len(t), dtype=np.int64))
        tss.append(np.asarray(t.ts, dtype=np.int64))
    rank, idx, ts = np.concatenate(ranks), np.concatenate(idxs), np.concatenate(tss)
    order = np.lexsort((idx, rank, ts))
    at = np.empty(order.size, dtype=np.int64)
    at[order] = np.arange(order.size, dtype=np.int64)  # the merged position of each concatenated tick
    ends = np.cumsum([r.size for r in ranks])
    where = [at[e - r.size: e] for e, r in zip(ends.tolist(), ranks)]
    return rank[order], idx[order], ts[order], where


def run_universe(universe: Universe, configs: Mapping[str, EngineConfig], bounds: PortfolioBounds,
                 plans: Mapping[str, ast.Plan], *, sessions: Sequence[SessionSpec] | None = None,
                 path: str = "auto") -> PortfolioEngine:
    """Every session of `sessions` (default: the universe's), each symbol's plan of `plans`
    armed at every open, run to the close on `path`."""
    engine = PortfolioEngine(universe, configs, bounds)
    for session in universe.sessions if sessions is None else sessions:
        engine.open_session(session)
        for s in universe.symbols:
            if s in plans:
                engine.arm(s, plans[s])
        engine.close_session(path)
    return engine


__all__ = ["PortfolioEngine", "run_universe"]
