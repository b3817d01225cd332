"""Random engine cases shared by the differential, segment and property tests: seeded
random days (synthetic full sessions, hand-rolled quote+trade days), random plans in Kestrel
text and random engine configs."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig
from kestrel.engine.history import TickHistory
from kestrel.market.instrument import qty_text, units_of
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

from engine_helpers import plan


def realistic_day(rng: random.Random) -> tuple[SessionSpec, Ticks]:
    """A full 6.5-hour session from the data generator (23,400 ticks about 1 s apart,
    U-shaped volatility, Poisson price jumps, spread widening), sometimes with a trading
    halt: a 5-40 minute stretch without ticks, across which the price gaps."""
    spec = SyntheticSpec(sessions=1, start_price=rng.choice([25.0, 180.0, 950.0]),
                         jumps_per_session=rng.choice([3.0, 12.0]),
                         daily_vol=rng.choice([0.01, 0.03]))
    md = generate(spec, rng.randrange(2**32))
    ticks = md.ticks
    if rng.random() < 0.5:
        a = rng.randrange(2000, len(ticks) - 3000)
        b = a + 60 * rng.randrange(5, 40)
        joined = TickHistory()
        joined.append(ticks.slice(0, a))
        joined.append(ticks.slice(b, len(ticks)))
        ticks = joined.view()
    return md.sessions[0], ticks


def random_day(rng: random.Random) -> tuple[SessionSpec, Ticks]:
    """A random quote+trade day: 9:30 open, a close that may fall inside the data,
    timestamps with repeats, a random walk on a 0.01 grid with a few price jumps of
    10-60 ticks and a 2-20 minute silence, sizes with zeros."""
    close_min = rng.choice([45, 60, 90, 390])
    session = SessionSpec(dt.date(2024, 4, 8), dt.time(9, 30),
                          (dt.datetime(2024, 4, 8, 9, 30) + dt.timedelta(minutes=close_min)).time())
    nrng = np.random.default_rng(rng.randrange(2**32))
    n = rng.randrange(1500, 5000)
    gaps = nrng.exponential(rng.choice([0.5, 1.0, 2.0]), n) * 1e9
    gaps[nrng.random(n) < 0.1] = 0  # equal timestamps
    gaps[rng.randrange(1, n)] += rng.randrange(120, 1200) * 1e9  # a silence (not gaps[0]: dropped below)
    ts = session.open_ns + np.cumsum(gaps).astype(np.int64) - int(gaps[0])
    steps = nrng.choice([-1, 0, 1], n, p=[0.3, 0.4, 0.3]) * rng.choice([1, 2])
    for _ in range(rng.randrange(0, 4)):  # price jumps
        steps[rng.randrange(n)] += rng.choice([-1, 1]) * rng.randrange(10, 60)
    mid_ticks = 10000 + np.cumsum(steps)
    spread = nrng.integers(1, 4, n)
    bid = mid_ticks / 100.0
    ask = (mid_ticks + spread) / 100.0
    last = np.where(nrng.random(n) < 0.5, bid, ask)
    size = np.where(nrng.random(n) < 0.3, 0.0, nrng.integers(1, 20, n).astype(np.float64))
    return session, Ticks.from_arrays(ts, bid, ask, last, size)


def indicator_atom(rng: random.Random) -> str:
    """A condition on one of rsi, stdev, zscore, the Bollinger bands, macd, its signal line,
    abs, min or max (ticks or bars)."""
    n = rng.choice([2, 3, 5, 14, 20])
    tf = rng.choice(["", "", f", {rng.choice([10, 30, 60])}s"])
    x = rng.choice(["last", "mid", "bid", "vwap"])
    k = rng.randrange(10)
    if k == 0:
        return f"rsi({n}{tf}) {rng.choice(['<', '>'])} {rng.choice([30, 50, 70])}"
    if k == 1:
        return f"rsi({n}{tf}) CROSSES {rng.choice(['ABOVE', 'BELOW'])} {rng.choice([30, 50, 70])}"
    if k == 2:
        return f"stdev({x}, {n}{tf}) {rng.choice(['>', '<'])} {rng.choice([0.005, 0.01, 0.03])}"
    if k == 3:
        return f"zscore({x}, {n}{tf}) {rng.choice(['>', '<'])} {rng.choice(['-1.5', '0', '1', '2'])}"
    if k == 4:
        band = rng.choice(["bbupper", "bblower"])
        return f"last {rng.choice(['>', '<'])} {band}({x}, {n}, {rng.choice([1, 2, 2.5])}{tf})"
    if k == 5:
        fast = rng.choice([2, 3, 5])
        return (f"macd({x}, {fast}, {fast + rng.choice([3, 10])}{tf}) CROSSES "
                f"{rng.choice(['ABOVE', 'BELOW'])} macdsignal({x}, {fast}, {fast + 3}, {rng.choice([3, 9])}{tf})")
    if k == 6:
        return f"macd({x}, 3, 10{tf}) {rng.choice(['>', '<'])} 0"
    if k == 7:
        return f"abs(chg({rng.choice([10, 60, 300])}s)) > {rng.choice([0.01, 0.05])}"
    if k == 8:
        return f"{rng.choice(['min', 'max'])}(bid, vwap) {rng.choice(['>', '<'])} open"
    return f"max(ask - bid, 0.01) <= {rng.choice([0.01, 0.02])} AND abs(pos) < {rng.choice([5, 50])}"


def random_cond(rng: random.Random, indicators: bool = False) -> str:
    """A random condition; with `indicators`, half its atoms use rsi, stdev, zscore, the
    bands, macd, macdsignal, abs, min or max."""
    def atom() -> str:
        if indicators and rng.random() < 0.5:
            return indicator_atom(rng)
        k = rng.randrange(14)
        s = rng.choice([3, 5, 10, 30, 60, 120, 300, 1800])
        n = rng.choice([2, 3, 5, 10, 20])
        x = rng.choice([0.01, 0.02, 0.05, 0.1])
        if k == 0:
            return f"last > high({s}s)"
        if k == 1:
            return f"last < low({s}s)"
        if k == 2:
            return f"mid CROSSES {rng.choice(['ABOVE', 'BELOW'])} sma(mid, {n})"
        if k == 3:
            return f"last CROSSES {rng.choice(['ABOVE', 'BELOW'])} ema(last, {n})"
        if k == 4:
            return f"chg({s}s) {rng.choice(['>', '<'])} {rng.choice(['', '-'])}{x}"
        if k == 5:
            return f"range({s}s) > {x}"
        if k == 6:
            return f"spread {rng.choice(['<', '<=', '==', '!='])} {rng.choice([0.01, 0.02, 0.03])}"
        if k == 7:
            hh = rng.choice([9, 9, 10, 12, 15])
            return f"time >= {hh:02d}:{rng.randrange(30 if hh == 9 else 0, 60):02d}:{rng.randrange(60):02d}"
        if k == 8:
            return f"last {rng.choice(['>', '<'])} vwap {rng.choice(['+', '-'])} {x}"
        if k == 9:
            return f"last {rng.choice(['>', '<'])} open {rng.choice(['+', '-'])} {x}"
        if k == 10:
            tf = rng.choice([", 10s", ", 30s", ", 60s", ""])  # "" = the default 1m bars
            return f"atr({n}{tf}) > {x / 2}"
        if k == 11:
            return f"sma(last, {n}, {rng.choice([10, 30])}s) {rng.choice(['>', '<'])} mid"
        if k == 12:
            return f"ema(mid, {n}, 20s) CROSSES {rng.choice(['ABOVE', 'BELOW'])} vwap"
        return f"(ask - bid) / mid * 10000 < {rng.choice([1, 2, 3])}"

    a = atom()
    r = rng.random()
    if r < 0.15:
        # account state: pos and rpnl only change on fills (fast-path eligible)
        acct = rng.choice(["pos == 0", "pos > 0", "pos < 0", "pos != 0", f"rpnl < -{rng.choice([1, 5])}",
                           f"rpnl > {rng.choice([0, 2])}", f"pos * 2 >= {rng.choice([10, 20])}"])
        return f"{acct} AND {a}" if rng.random() < 0.7 else f"{a} OR {acct}"
    if r < 0.25:
        return f"{a} AND {atom()}"
    if r < 0.4:
        return f"{a} OR NOT {atom()}"
    return a


def lots_text(n: int, lot: float) -> str:
    """`n` lots of `lot` as a quantity literal (the count itself for a lot of 1)."""
    return str(n) if lot == 1 else qty_text(units_of(n, lot), lot)


def random_action(rng: random.Random, indicators: bool = False, lot: float = 1.0) -> str:
    r = rng.random()
    if r < 0.08:
        return "FLAT"
    if r < 0.12:
        return "CANCEL"
    side = rng.choice(["BUY", "SELL"])
    sgn = -1 if side == "BUY" else 1
    qty = rng.randrange(1, 20)
    kind = rng.choice(["MKT", "MKT", "LMT", "STP"])
    if kind == "LMT" and indicators and rng.random() < 0.4:  # a limit at a band or a min/max
        kind = ("LMT min(bid, bblower(mid, 20, 1))" if side == "BUY"
                else "LMT max(ask, bbupper(mid, 20, 1))")
    elif kind == "LMT":
        ref = "bid" if side == "BUY" else "ask"
        kind = f"LMT {ref}{'-' if side == 'BUY' else '+'}{rng.choice([0, 0.01, 0.02])}"
    elif kind == "STP":
        kind = f"STP {'ask+' if side == 'BUY' else 'bid-'}{rng.choice([0.01, 0.02, 0.05])}"
    out = f"{side} {lots_text(qty, lot)} {kind}"
    if rng.random() < 0.6:
        out += f" STOP {'-' if sgn < 0 else '+'}{rng.choice([0.02, 0.05, 0.1])}%"
    if rng.random() < 0.5:
        out += f" TARGET {'+' if sgn < 0 else '-'}{rng.choice([0.03, 0.08, 0.2])}"
    if rng.random() < 0.3:
        out += f" TRAIL {rng.choice(['0.03', '0.05%', '0.1'])}"
    if rng.random() < 0.3:
        out += f" TTL {rng.choice([2, 10, 60])}s"
    return out


def random_plan_text(rng: random.Random, indicators: bool = False, lot: float = 1.0) -> str:
    """A random plan; quantities (and maxpos) are counts of `lot`, so for any lot the rng
    draws the same plan shape."""
    head = "PLAN r"
    e = rng.random()
    if e < 0.2:
        head += f" FOR {rng.choice([5, 20, 40])}m"
    elif e < 0.35:
        hh = rng.choice([9, 9, 11, 14])
        head += f" UNTIL {hh:02d}:{rng.randrange(35 if hh == 9 else 0, 60):02d}"
    risk = []
    if rng.random() < 0.7:
        risk.append(f"maxpos {lots_text(rng.choice([20, 50, 200]), lot)}")
    if rng.random() < 0.7:
        risk.append(f"maxloss {rng.choice([2, 10, 50, 500])}")
    if rng.random() < 0.5:
        risk.append(f"maxorders {rng.choice([2, 5, 20])}")
    if risk:
        head += " RISK " + " ".join(risk)
    rules = []
    for _ in range(rng.randrange(1, 4)):
        acts = "; ".join(random_action(rng, indicators, lot) for _ in range(rng.choice([1, 1, 2])))
        rep = f" x{rng.randrange(2, 6)}" if rng.random() < 0.5 else ""
        rules.append(f"WHEN {random_cond(rng, indicators)}: {acts}{rep}")
    return head + "\n" + "\n".join(rules)


def random_config(rng: random.Random, lot: float = 1.0) -> EngineConfig:
    """A random execution model; with a `lot` other than 1 the bounds and fees in money are
    scaled by it (and maxpos is that many lots), so the same draws bind as often."""
    if lot == 1:
        maxpos: int | float = rng.choice([50, 1000])
        maxloss = rng.choice([20.0, 1000.0])
    else:
        maxpos = units_of(rng.choice([50, 1000]), lot)
        maxloss = rng.choice([20.0, 1000.0]) * lot
    maxorders = rng.choice([10, 50])
    session_maxloss = rng.choice([None, None, 15.0, 60.0])
    if session_maxloss is not None and lot != 1:
        session_maxloss *= lot
    fee_unit = rng.choice([0.0, 0.005])
    fee_order = rng.choice([0.0, 1.0])
    return EngineConfig(
        maxpos=maxpos,
        maxloss=maxloss,
        maxorders=maxorders,
        session_maxloss=session_maxloss,
        fee_per_unit=fee_unit,
        fee_per_order=fee_order if lot == 1 else fee_order * lot,
        lot_size=lot,
        slippage_ticks=rng.choice([0, 0, 1]),
        latency_ticks=rng.choice([0, 0, 1, 3]),
        latency_ns=rng.choice([0, 0, 250_000_000, 2_000_000_000]),
        end_of_day=rng.choice(["flatten", "carry"]),
        partial_fills=rng.random() < 0.3,
    )


def armed(session: SessionSpec, text: str, cfg: EngineConfig) -> Engine:
    e = Engine(cfg, session, "TEST", 0.01)
    e.arm(plan(text, cfg.lot_size))
    return e
