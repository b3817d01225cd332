"""Random portfolio runs whose plans read other symbols (`OTHER.last > OTHER.vwap` joined to a
random condition), for the reference-vs-auto differential of cross-symbol reads: the universes,
bounds, configs and plans of `portfolio_cases` and `engine_cases`, each symbol's plan reading
another member (or itself, in a universe of one) now and then."""

from __future__ import annotations

import random
import re

from kestrel.engine.portfolio import PortfolioEngine

from engine_cases import random_config, random_plan_text
from engine_helpers import plan
from portfolio_cases import random_bounds, random_universe

READS = ("{o}.last > {o}.vwap", "{o}.chg(1m) > 0%", "{o}.mid CROSSES ABOVE {o}.sma(mid,5)",
         "NOT {o}.rsi(5) > 70", "{o}.zscore(last,8) < 0.5", "last / {o}.last > 1")


def cross_plan_text(rng: random.Random, symbol: str, symbols: tuple[str, ...]) -> str:
    """A random plan ON `symbol` whose first rule also reads another member of `symbols`."""
    others = [s for s in symbols if s != symbol] or [symbol]
    read = rng.choice(READS).format(o=rng.choice(others))
    join = rng.choice(["AND", "OR"])
    text = re.sub(r"WHEN (.*?): ", lambda m: f"WHEN ({m.group(1)}) {join} {read}: ", random_plan_text(rng), count=1)
    return text.replace("PLAN r", f"PLAN r ON {symbol}", 1)


def random_xsym_run(rng: random.Random, path: str) -> PortfolioEngine:
    """Each session arms every symbol's plan at the open (a cross-symbol plan half the time),
    runs to a random instant, then arms another (cross-symbol half the time), stands one
    symbol down or does nothing, and runs to the close."""
    universe = random_universe(rng)
    bounds = random_bounds(rng)
    configs = {s: random_config(rng) for s in universe.symbols}
    syms = universe.symbols

    def draw(s: str) -> str:
        return cross_plan_text(rng, s, syms) if rng.random() < 0.5 else random_plan_text(rng)

    plans = {s: [plan(draw(s)) for _ in range(2)] for s in syms}
    steps = [(rng.randrange(60, 1800), rng.randrange(3), rng.choice(syms)) for _ in universe.sessions]
    pe = PortfolioEngine(universe, configs, bounds)
    for session, (at_s, what, sym) in zip(universe.sessions, steps):
        pe.open_session(session)
        for s in syms:
            pe.arm(s, plans[s][0])
        cut = session.open_ns + at_s * 1_000_000_000
        pe.run(cut, path)
        if what == 0:
            pe.arm(sym, plans[sym][1], cut)
        elif what == 1:
            pe.stand_down(sym, "stand down", cut)
        pe.close_session(path)
    return pe
