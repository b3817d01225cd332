"""A universe session on the actor backend (asyncio and trio) against the in-process driver
(`run_portfolio`): the same ledger, capture, turns and evidence, byte for byte, over the shared
4-symbol minute universe (trade and quote bars joined; skipped when the data is absent) and a
generated daily universe of several sessions; the capture of an actor run replays to its
ledger; only terminal turns travel on the bus; an agent that raises or hangs stands every symbol
down on both backends alike; `kestrel simulate --backend asyncio|trio` writes the ledger of
`--backend direct`."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from kestrel.cli import main
from kestrel.data.universe import load_universe
from kestrel.engine import EngineConfig
from kestrel.engine.ledger import Filled
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.universe import Universe
from kestrel.service.actors.portfolio import ApplyTurn, run_universe_simulation, simulate_universe
from kestrel.session.loop import Evidence, LoopSettings
from kestrel.session.options import SessionOptions
from kestrel.session.portfolio import ModuleAgent, PortfolioResult, replay, run_portfolio
from kestrel.session.protocol import Agent, AgentReply, AuthorRequest, Usage

from engine_cases import random_plan_text
from portfolio_cases import random_bounds, random_universe

pytestmark = pytest.mark.anyio

MINUTE_TRADES = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
MINUTE_QUOTES = "equities_minute/lean_us_equities_minute_quote_bars_20131004_20131011.parquet"
CROSS = ("PLAN {n} ON {s}\nWHEN mid CROSSES ABOVE sma(mid, 20) AND pos == 0: BUY 50 MKT STOP -0.3% TARGET +0.5%\n"
         "WHEN mid CROSSES BELOW sma(mid, 20) AND pos > 0: FLAT")


class Scripted:
    """An iterative agent answering each request with the next text of its script (then PASS);
    `!raise` raises, `!hang` blocks until released (a blocking agent then)."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.release = threading.Event()

    @property
    def agent_id(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "script-model"

    def author(self, request: AuthorRequest) -> AgentReply:
        text = self.texts.pop(0) if self.texts else "PASS"
        if text == "!raise":
            raise RuntimeError("boom")
        if text == "!hang":
            self.release.wait(5)
            text = "PASS"
        return AgentReply(text, usage=Usage(input=100, output=20))


class BlockingScripted(Scripted):
    """A `Scripted` called on its own thread, under the call timeout."""

    blocking: ClassVar[bool] = True


def _minute(shared_data: Path) -> Universe:
    return load_universe(shared_data / MINUTE_TRADES, quotes=shared_data / MINUTE_QUOTES).universe


def _daily(tmp_path: Path, n_sym: int = 5, n_days: int = 12, seed: int = 7) -> Universe:
    """A long-format daily file of `n_sym` symbols over `n_days` weekday sessions (a random walk)."""
    rng = random.Random(seed)
    rows = ["date,symbol,open,high,low,close,volume"]
    day = dt.date(2024, 3, 4)
    prices = {f"S{i}": rng.uniform(20, 200) for i in range(n_sym)}
    made = 0
    while made < n_days:
        if day.weekday() < 5:
            for sym in prices:
                o = prices[sym]
                c = max(1.0, o * (1 + rng.uniform(-0.03, 0.03)))
                rows.append(f"{day.isoformat()},{sym},{o:.2f},{max(o, c) * 1.01:.2f},{min(o, c) * 0.99:.2f},"
                            f"{c:.2f},{rng.randrange(1000, 90000)}")
                prices[sym] = c
            made += 1
        day += dt.timedelta(days=1)
    path = tmp_path / "daily.csv"
    path.write_text("\n".join(rows) + "\n")
    return load_universe(path).universe


def _evidence(records: list[Evidence]) -> bytes:
    """The evidence without its wall-clock latencies (the only field that measures time)."""
    return msgspec.json.encode([msgspec.structs.replace(e, latency_ms=None) for e in records])


def _same(a: PortfolioResult, b: PortfolioResult) -> None:
    assert a.ledger.to_jsonl() == b.ledger.to_jsonl()
    assert a.capture.to_json() == b.capture.to_json()
    assert _evidence(a.evidence) == _evidence(b.evidence)


async def _both(universe: Universe, make: Callable[[], Agent], bounds: PortfolioBounds, options: SessionOptions,
                *, date: dt.date | None = None, days: int = 1) -> tuple[PortfolioResult, PortfolioResult]:
    """The in-process run and the actor run of fresh agents from `make()`."""
    direct = run_portfolio(universe, make(), bounds, options, date=date, days=days)
    actors = await simulate_universe(universe, make(), bounds, options, date=date, days=days)
    return direct, actors


async def test_the_minute_universe_on_actors_matches_the_direct_run(anyio_backend: str, shared_data: Path) -> None:
    """An iterative agent over two sessions with a checkpoint: a VIEW, a repaired bad module, a
    module of SMA crosses on every symbol, a STANDDOWN ON one symbol at the checkpoint."""
    u = _minute(shared_data)
    module = "\n".join(CROSS.format(n=s.lower(), s=s) for s in u.symbols)

    def agent() -> Scripted:
        return Scripted("VIEW v: quote(SPY), watchlist, portfolio", "PLAN x\nWHEN pos == 0: BUY 1 MKT", module,
                        'STANDDOWN ON BAC "enough"', module, "PASS")

    options = SessionOptions(engine=EngineConfig(maxpos=100, maxorders=200), checkpoints=("12:00",),
                             settings=LoopSettings(view_request_cap=3, authoring_token_budget=5000))
    bounds = PortfolioBounds(capital=12000.0, max_open=2)
    day = u.sessions[-2].date
    direct, actors = await _both(u, agent, bounds, options, date=day, days=2)
    _same(direct, actors)
    kinds = [e.kind for e in actors.evidence]
    assert "view-request" in kinds and "repair" in kinds
    assert actors.turns[1].applied == "BAC stood down"
    fills = {s for s, e in actors.ledger.entries if isinstance(e, Filled)}
    assert len(fills) >= 2
    assert replay(u, actors.capture).ledger.to_jsonl() == actors.ledger.to_jsonl()


async def test_a_generated_daily_universe_on_actors_matches_the_direct_run(anyio_backend: str,
                                                                          tmp_path: Path) -> None:
    """Ten daily sessions of five symbols, positions carried from session to session."""
    u = _daily(tmp_path)
    text = "\n".join(f"PLAN p{i} ON {s}\nWHEN pos == 0 AND last > sma(last, 3): BUY $2000 MKT\n"
                     f"WHEN pos > 0 AND last < sma(last, 3): FLAT" for i, s in enumerate(u.symbols))
    options = SessionOptions(engine=EngineConfig(maxpos=1000, end_of_day="carry"))
    bounds = PortfolioBounds(capital=10000.0, max_open=3, no_short=True)
    direct, actors = await _both(u, lambda: ModuleAgent(text, "cross"), bounds, options, days=10)
    _same(direct, actors)
    assert len(actors.capture.dates) == 10 and len(actors.turns) == 10
    assert sum(1 for _, e in actors.ledger.entries if isinstance(e, Filled)) >= 3
    assert replay(u, actors.capture).ledger.to_jsonl() == direct.ledger.to_jsonl()


async def test_only_terminal_turns_travel_on_the_bus(anyio_backend: str, tmp_path: Path) -> None:
    u = _daily(tmp_path, n_sym=2, n_days=3)
    a, b = u.symbols
    agent = Scripted("VIEW v: watchlist", f"PLAN a ON {a}\nWHEN pos == 0: BUY 1 MKT", f'STANDDOWN ON {b} "no"',
                     "PASS")
    carried: list[ApplyTurn] = []
    r = await simulate_universe(u, agent, PortfolioBounds(capital=5000.0), SessionOptions(), days=3, turns=carried)
    assert [len(t.turn.plans) for t in carried] == [1, 0, 0]
    assert [t.turn.stand_down for t in carried] == [(), (b,), ()]
    assert [t.at_ns for t in carried] == [s.open_ns for s in u.sessions[-3:]]
    assert [t.applied for t in r.turns] == [f"armed a on {a}", f"{b} stood down", "passed"]


async def test_an_agent_that_raises_stands_every_symbol_down_alike(anyio_backend: str, tmp_path: Path) -> None:
    u = _daily(tmp_path, n_sym=3, n_days=4)
    module = "\n".join(f"PLAN p{i} ON {s}\nWHEN pos == 0: BUY 2 MKT" for i, s in enumerate(u.symbols))
    options = SessionOptions(engine=EngineConfig(maxpos=10, end_of_day="carry"))
    bounds = PortfolioBounds(capital=5000.0)
    direct, actors = await _both(u, lambda: Scripted(module, "!raise", module), bounds, options, days=3)
    _same(direct, actors)
    assert actors.turns[1].text.startswith("STANDDOWN") and "boom" in actors.turns[1].text
    assert actors.turns[1].applied.startswith("all stood down")


async def test_a_hung_call_times_out_into_a_stand_down_and_abandoned_evidence(anyio_backend: str, tmp_path: Path) -> None:
    u = _daily(tmp_path, n_sym=2, n_days=3)
    agent = BlockingScripted("!hang")
    r = await simulate_universe(u, agent, PortfolioBounds(capital=5000.0), SessionOptions(), days=2,
                                agent_timeout=0.2)
    agent.release.set()
    assert r.turns[0].text.startswith("STANDDOWN") and "0.2s" in r.turns[0].text
    assert [e.kind for e in r.evidence if e.kind in ("late-reply", "abandoned")] == ["abandoned"]


@pytest.mark.parametrize("seed", range(8))
async def test_random_universes_and_turns_on_actors_match_the_direct_run(anyio_backend: str, seed: int) -> None:
    """Random universes (ticks on a shared grid, missing sessions, splits), random bounds and
    random plans; at each ordinal a module, a VIEW then a module, a STANDDOWN of one symbol or
    all, a PASS or a bad reply repaired."""
    rng = random.Random(f"actors-{seed}")
    u = random_universe(rng)
    bounds = random_bounds(rng)
    modules = ["\n".join(random_plan_text(rng).replace("PLAN r", f"PLAN r{k} ON {sym}", 1)
                         for k, sym in enumerate(u.symbols) if rng.random() < 0.8) or "PASS" for _ in range(4)]
    script: list[str] = []
    for _ in range(len(u.sessions) * 2):
        kind = rng.choices(range(5), weights=[8, 5, 2, 1, 2])[0]
        module = rng.choice(modules)
        script += ([module] if kind == 0 else ["VIEW v: watchlist, portfolio", module] if kind == 1 else
                   [f'STANDDOWN ON {rng.choice(u.symbols)} "x"', "PASS"][: rng.randrange(1, 3)] if kind == 2 else
                   ['STANDDOWN "all"'] if kind == 3 else ["PLAN bare\nWHEN pos == 0: BUY 1 MKT", module])
    options = SessionOptions(engine=EngineConfig(end_of_day=rng.choice(["flatten", "carry"])),
                             checkpoints=rng.choice([(), ("09:50",)]), guard_s=rng.choice([0, 60]),
                             settings=LoopSettings(view_request_cap=3, authoring_token_budget=4000))
    direct, actors = await _both(u, lambda: Scripted(*script), bounds, options, date=u.sessions[-1].date,
                                 days=len(u.sessions))
    _same(direct, actors)
    assert len(actors.turns) == len(u.sessions) * (1 + len(options.checkpoints))


def test_simulate_backend_actors_writes_the_direct_ledger(tmp_path: Path) -> None:
    u = _daily(tmp_path, n_sym=3, n_days=5)
    plans = tmp_path / "m.kes"
    plans.write_text("\n".join(f"PLAN p{i} ON {s}\nWHEN pos == 0: BUY 3 MKT" for i, s in enumerate(u.symbols)))
    data = str(tmp_path / "daily.csv")
    outs = {}
    for backend in ("direct", "asyncio", "trio"):
        out = tmp_path / f"{backend}.jsonl"
        cap = tmp_path / f"{backend}.cap"
        assert main(["simulate", "--data", data, "--agent", f"fixed:{plans}", "--days", "4", "--backend", backend,
                     "--ledger", str(out), "--capture", str(cap)]) == 0
        outs[backend] = (out.read_bytes(), cap.read_bytes())
    assert outs["asyncio"] == outs["direct"] == outs["trio"]
    assert b'"event":"fill"' in outs["direct"][0]


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="use asyncio or trio"):
        run_universe_simulation(Universe((), (), "XNYS", ()), ModuleAgent("PASS"), PortfolioBounds(capital=1.0),
                                backend="curio")
