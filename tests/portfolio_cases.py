"""Random universes for the portfolio engine's tests: a few symbols over a few short sessions,
ticks on a shared one-second grid (so symbols often tick at the same instant and the tie order
matters), a symbol now and then without a tick in a session, random splits; random operator
bounds; and the seeded random plans and configs of `engine_cases`."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import numpy as np

from kestrel.engine import EngineConfig
from kestrel.engine.portfolio import PortfolioEngine
from kestrel.market.corporate import Split
from kestrel.market.data import MarketData
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe

from engine_cases import random_config, random_plan_text
from engine_helpers import plan

SYMBOLS = ("AAA", "BBB", "CCC", "DDD")


def random_universe(rng: random.Random) -> Universe:
    n_sym = rng.randrange(1, 5)
    days = rng.randrange(1, 4)
    close_min = rng.choice([30, 60])
    sessions = []
    day = dt.date(2024, 4, 8)
    for _ in range(days):
        sessions.append(SessionSpec(day, dt.time(9, 30),
                                    (dt.datetime(2024, 4, 8, 9, 30) + dt.timedelta(minutes=close_min)).time()))
        day += dt.timedelta(days=1)
    nrng = np.random.default_rng(rng.randrange(2**32))
    members = []
    splits = []
    for s in SYMBOLS[:n_sym]:
        base = rng.choice([2500, 10000, 18000])  # in ticks of 0.01
        parts = []
        price = base
        for k, sess in enumerate(sessions):
            if rng.random() < 0.15:  # no tick in this session
                continue
            if k and rng.random() < 0.2:
                num, den = rng.choice([(2, 1), (1, 2), (3, 1)])
                splits.append(Split(s, sess.date, num, den))
                price = max(100, price * den // num)
            span = close_min * 60 + rng.choice([0, 0, 60])  # past the close now and then
            n = rng.randrange(40, 400)
            secs = np.sort(nrng.choice(span, size=min(n, span), replace=False))
            if rng.random() < 0.3:  # repeated timestamps within the symbol
                secs = np.sort(np.concatenate([secs, secs[: len(secs) // 5]]))
            m = len(secs)
            steps = nrng.choice([-2, -1, 0, 1, 2], m)
            mid = np.maximum(price + np.cumsum(steps), 50)
            price = int(mid[-1])
            spread = nrng.integers(1, 4, m)
            bid = mid / 100.0
            ask = (mid + spread) / 100.0
            last = np.where(nrng.random(m) < 0.5, bid, ask)
            size = np.where(nrng.random(m) < 0.3, 0.0, nrng.integers(1, 20, m).astype(np.float64))
            ts = sess.open_ns + secs.astype(np.int64) * 1_000_000_000
            parts.append(Ticks.from_arrays(ts, bid, ask, last, size))
        if parts:
            ticks = Ticks.from_arrays(np.concatenate([p.ts for p in parts]), np.concatenate([p.bid for p in parts]),
                                      np.concatenate([p.ask for p in parts]), np.concatenate([p.last for p in parts]),
                                      np.concatenate([p.size for p in parts]))
        else:
            ticks = Ticks.from_arrays(np.zeros(0, np.int64), *(np.zeros(0) for _ in range(4)))
        data = MarketData(s, 0.01, ticks, tuple(sessions))
        members.append(Member(s, data, data, Decimal(1)))
    splits.sort(key=lambda x: (x.date, x.symbol))
    return Universe(tuple(members), tuple(sessions), "XNYS", tuple(splits))


def random_bounds(rng: random.Random) -> PortfolioBounds:
    return PortfolioBounds(
        capital=rng.choice([1500.0, 8000.0, 40000.0, 1e9]),
        max_gross=rng.choice([1.0, 1.0, 2.0, 0.5]),
        max_open=rng.choice([None, None, 1, 2]),
        session_maxloss=rng.choice([None, None, None, 40.0]),
        no_short=rng.random() < 0.4,
    )


def random_run(rng: random.Random, path: str) -> PortfolioEngine:
    """A random universe, bounds, configs and plans (the same draws for one seed whatever the
    path): each session arms every symbol's plan at the open, runs to a random instant, then
    supersedes, stands down one symbol or all, or does nothing, and runs to the close."""
    universe = random_universe(rng)
    bounds = random_bounds(rng)
    configs = {s: random_config(rng) for s in universe.symbols}
    plans = {s: [plan(_sessions_long(rng, random_plan_text(rng))) for _ in range(2)] for s in universe.symbols}
    steps = [(rng.randrange(60, 1800), rng.randrange(4), rng.choice(universe.symbols)) for _ in universe.sessions]
    pe = PortfolioEngine(universe, configs, bounds)
    for session, (at_s, what, sym) in zip(universe.sessions, steps):
        pe.open_session(session)
        for s in universe.symbols:
            pe.arm(s, plans[s][0])
        cut = session.open_ns + at_s * 1_000_000_000
        pe.run(cut, path)
        if what == 0:
            pe.arm(sym, plans[sym][1], cut)
        elif what == 1:
            pe.stand_down(sym, "stand down", cut)
        elif what == 2:
            pe.stand_down(None, "all stand down", cut)
        pe.close_session(path)
    return pe


def _sessions_long(rng: random.Random, text: str) -> str:
    """Now and then a plan without an expiry lives FOR 2 sessions."""
    head, _, rest = text.partition("\n")
    if rng.random() < 0.3 and " FOR " not in head and " UNTIL " not in head:
        head = head.replace("PLAN r", "PLAN r FOR 2d", 1)
    return head + "\n" + rest
