"""A portfolio's account marked at every tick of a universe run: cash, equity, gross and net
exposure after each merged tick, from per-symbol position changes and cash flows.

The merged ticks of a run are every member's session ticks (open to close inclusive, as a
single-symbol run feeds them) over the run's sessions, in time order; at equal `ts` the
members in universe order (sorted by symbol), within a member in data order. A member's own
tick index counts its own ticks from the start of the run (what a symbol-stamped ledger line's
`tick` is); `MergedTicks.merged_index` maps (member, own tick) to the merged index.

Marks (`kestrel.market.portfolio`): a holding's value is position x mark x multiplier, the mark
the touch of the member's latest tick at or before the merged tick (bid for a long, ask for a
short; for daily bars bid = ask = the traded price); equity = cash + the sum of values,
gross = the sum of |value|, net = the sum of values. A member's value changes only at its own
ticks: its state at its own tick j is the one after every change stamped on or before j, so a
split between two of its ticks is marked at its next tick, with the price that trades after it.
Money is rounded to the run's money quantum (`decimals`) after each change, as the engine keeps
it. Pure and deterministic.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kestrel.engine.config import EngineConfig
from kestrel.engine.money import Money
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class MergedTicks:
    """The merged ticks of a run (module docstring): per merged tick its `ts`, member index
    `member`, the member's own tick index `own`, `bid` and `ask`; `sessions` the run's sessions
    and `session_of` each merged tick's index into them; `starts[m]` where member m's own ticks
    begin in `order` (the merged indices of member m's own ticks are `order[starts[m]:starts[m+1]]`)."""

    symbols: tuple[str, ...]
    multipliers: F64
    ts: I64
    member: I64
    own: I64
    bid: F64
    ask: F64
    sessions: tuple[SessionSpec, ...]
    session_of: I64
    order: I64
    starts: I64

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def own_count(self, m: int) -> int:
        return int(self.starts[m + 1] - self.starts[m])

    def merged_index(self, m: int, own: int) -> int:
        """The merged index of member `m`'s own tick `own` (ValueError when it has no such tick)."""
        if not 0 <= own < self.own_count(m):
            raise ValueError(f"{self.symbols[m]} has no tick {own} in the run ({self.own_count(m)} ticks)")
        return int(self.order[self.starts[m] + own])

    def own_merged(self, m: int) -> I64:
        """The merged indices of member `m`'s own ticks, in order."""
        return self.order[self.starts[m]:self.starts[m + 1]]

    def first_at_or_after(self, m: int, ts: int) -> int | None:
        """Member `m`'s first own tick index with ts >= `ts`, None when it has none."""
        idx = self.own_merged(m)
        k = int(np.searchsorted(self.ts[idx], ts, side="left"))
        return k if k < idx.shape[0] else None


def run_sessions(universe: Universe, dates: Sequence[str | dt.date] | None = None) -> tuple[SessionSpec, ...]:
    """The universe's sessions on `dates` (ISO strings or dates; all its sessions when None), in
    order. A date that is not a session of the universe is a ValueError naming it."""
    if dates is None:
        return universe.sessions
    by_date = {s.date: s for s in universe.sessions}
    out: list[SessionSpec] = []
    for d in dates:
        day = d if isinstance(d, dt.date) else dt.date.fromisoformat(d)
        if day not in by_date:
            raise ValueError(f"{day} is not a session of the universe "
                             f"({universe.sessions[0].date} .. {universe.sessions[-1].date})"
                             if universe.sessions else f"{day}: the universe has no sessions")
        out.append(by_date[day])
    return tuple(sorted(set(out), key=lambda s: s.open_ns))


def merge_ticks(universe: Universe, sessions: Sequence[SessionSpec],
                configs: Mapping[str, EngineConfig] | None = None) -> MergedTicks:
    """The merged ticks of a run over `sessions` of `universe` (module docstring), each
    member's multiplier the run's (`multiplier_of` its config in `configs`)."""
    ts_p: list[I64] = []
    bid_p: list[F64] = []
    ask_p: list[F64] = []
    mem_p: list[I64] = []
    own_p: list[I64] = []
    ses_p: list[I64] = []
    counts: list[int] = []
    for m, member in enumerate(universe.members):
        t = member.data.ticks
        n = 0
        for k, s in enumerate(sessions):
            a, b = t.index_at(s.open_ns, side="left"), t.index_at(s.close_ns, side="right")
            if b <= a:
                continue
            ts_p.append(np.asarray(t.ts[a:b], dtype=np.int64))
            bid_p.append(np.asarray(t.bid[a:b], dtype=np.float64))
            ask_p.append(np.asarray(t.ask[a:b], dtype=np.float64))
            mem_p.append(np.full(b - a, m, dtype=np.int64))
            own_p.append(np.arange(n, n + b - a, dtype=np.int64))
            ses_p.append(np.full(b - a, k, dtype=np.int64))
            n += b - a
        counts.append(n)

    def ints(parts: Sequence[I64]) -> I64:
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def floats(parts: Sequence[F64]) -> F64:
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0, dtype=np.float64)

    ts = ints(ts_p)
    mem = ints(mem_p)
    own = ints(own_p)
    perm = np.lexsort((own, mem, ts))  # ts, then universe order, then data order
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.shape[0], dtype=perm.dtype)
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    order = inverse.astype(np.int64)  # input order is member by member, own ticks in order
    mults = np.array([multiplier_of(m.instrument.multiplier, (configs or {}).get(m.symbol, EngineConfig()))
                      for m in universe.members], dtype=np.float64)
    return MergedTicks(universe.symbols, mults, ts[perm], mem[perm], own[perm], floats(bid_p)[perm],
                       floats(ask_p)[perm], tuple(sessions), ints(ses_p)[perm], order, starts)


@dataclass(frozen=True)
class PositionPath:
    """One member's position over the run: after own tick `at[i]` (and every own tick up to the
    next change) the position is `pos[i]`; flat before the first change."""

    at: I64
    pos: F64


@dataclass(frozen=True)
class AccountCurve:
    """The account after every merged tick (module docstring), and per member its value at its
    own ticks (`values[m]`, aligned with `MergedTicks.own_merged(m)`)."""

    ts: I64
    cash: F64
    equity: F64
    gross: F64
    net: F64
    open_positions: I64
    values: tuple[F64, ...]
    positions: tuple[F64, ...]  # per member, its position at each of its own ticks
    capital: float = 0.0  # the cash it started from

    def __len__(self) -> int:
        return int(self.ts.shape[0])


def _round(x: F64 | float, decimals: int) -> F64:
    scale = 10.0**decimals
    return np.asarray(np.round(np.asarray(x, dtype=np.float64) * scale) / scale, dtype=np.float64)


def mark_account(ticks: MergedTicks, capital: float, paths: Mapping[int, PositionPath],
                 cash_flows: Sequence[tuple[int, float]], *, decimals: int = 2) -> AccountCurve:
    """The account marked at every merged tick: `paths` the members' positions (member index ->
    path over its own ticks; members not in it are flat), `cash_flows` (merged index, amount)
    pairs, each counted from that tick on (fills: -signed qty x price x multiplier - fee;
    dividends: + amount)."""
    n = len(ticks)
    flows = np.zeros(n, dtype=np.float64)
    for k, amount in cash_flows:
        flows[k] += amount
    cash = _round(capital + np.cumsum(flows), decimals) if n else np.zeros(0, dtype=np.float64)
    d_net = np.zeros(n, dtype=np.float64)
    d_gross = np.zeros(n, dtype=np.float64)
    d_open = np.zeros(n, dtype=np.int64)
    values: list[F64] = []
    positions: list[F64] = []
    for m in range(len(ticks.symbols)):
        idx = ticks.own_merged(m)
        count = idx.shape[0]
        path = paths.get(m)
        if path is None or path.at.shape[0] == 0 or count == 0:
            pos = np.zeros(count, dtype=np.float64)
        else:
            last = np.searchsorted(path.at, np.arange(count, dtype=np.int64), side="right") - 1
            pos = np.where(last >= 0, path.pos[np.maximum(last, 0)], 0.0)
        touch = np.where(pos > 0, ticks.bid[idx], ticks.ask[idx])
        value = np.where(pos != 0, _round(pos * touch * ticks.multipliers[m], decimals), 0.0)
        prev = np.concatenate(([0.0], value[:-1]))
        np.add.at(d_net, idx, value - prev)
        np.add.at(d_gross, idx, np.abs(value) - np.abs(prev))
        held = (pos != 0).astype(np.int64)
        np.add.at(d_open, idx, held - np.concatenate(([0], held[:-1])))
        values.append(value.astype(np.float64))
        positions.append(pos.astype(np.float64))
    net = _round(np.cumsum(d_net), decimals)
    gross = _round(np.cumsum(d_gross), decimals)
    equity = _round(cash + net, decimals)
    return AccountCurve(ticks.ts, cash, equity, gross, net, np.cumsum(d_open).astype(np.int64),
                        tuple(values), tuple(positions), capital)


def money_quantum(universe: Universe, configs: Mapping[str, EngineConfig] | None = None) -> int:
    """The run's money quantum in decimals: the finest any member's prices, lots and fees need
    under its execution model (`configs`, symbol -> config; the default model when None), as the
    engine derives it (`kestrel.engine.money.Money.derive`: cents, or finer when one tick of one
    lot is worth less), so cash from fills is exact."""
    out = 2
    for m in universe.members:
        cfg = (configs or {}).get(m.symbol, EngineConfig())
        mult = multiplier_of(m.instrument.multiplier, cfg)
        lot = float(m.lot_size) if cfg.lot_size == 1 else cfg.lot_size
        out = max(out, Money.derive(m.data.tick_size, mult, cfg.slippage_ticks, cfg.fee_per_unit, cfg.fee_per_order,
                                    cfg.money_decimals, lot).decimals)
    return out


def multiplier_of(instrument_multiplier: float, config: EngineConfig) -> float:
    """The run's contract multiplier: the config's when it sets one (not 1), else the
    instrument's (as a run resolves it)."""
    return config.multiplier if config.multiplier != 1.0 else instrument_multiplier


def max_drawdown(ts: I64, equity: F64, start: float) -> tuple[float, int | None]:
    """The largest fall of `equity` from its running peak, the peak starting at `start` (the
    capital), and the trough's time; (0, None) without a fall."""
    if equity.shape[0] == 0:
        return 0.0, None
    peak = np.maximum.accumulate(np.maximum(equity, start))
    dd = peak - equity
    k = int(np.argmax(dd))
    return (float(dd[k]), int(ts[k])) if dd[k] > 0 else (0.0, None)


__all__ = ["AccountCurve", "MergedTicks", "PositionPath", "mark_account", "max_drawdown", "merge_ticks", "money_quantum",
           "multiplier_of",
           "run_sessions"]
