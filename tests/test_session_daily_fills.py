"""Daily bars fill at the open: a market buy decided at the CLOSE of day D, or at the OPEN of
D+1, fills at D+1's open price, read here from the raw StockBench file with pandas; the OPEN's
briefing never sees D+1's open; an arm latency past the opening ticks applies the turn where it
lands; intraday sessions keep their OPEN timing."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import ClassVar

import pandas as pd  # type: ignore[import-untyped]  # exchange-calendars' own dependency
import pytest

from kestrel.data.universe import load_universe
from kestrel.engine.ledger import Filled, Fired
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.ticks import NS_PER_S
from kestrel.market.universe import Universe
from kestrel.session.options import SessionOptions
from kestrel.session.portfolio import PortfolioCapture, PortfolioResult, replay, run_portfolio
from kestrel.session.portfolio_day import daily_bars, daily_session
from kestrel.session.protocol import AgentReply, AuthorRequest

from universe_support import STOCKBENCH

SYMBOLS = ("AAPL", "CAT", "JPM", "MSFT", "UNH")
DAYS = (dt.date(2025, 1, 2), dt.date(2025, 3, 10), dt.date(2025, 4, 3), dt.date(2025, 4, 8),
        dt.date(2025, 6, 2), dt.date(2025, 7, 29))  # D: up and down days, the April 2025 swings
CAPITAL = PortfolioBounds(capital=1_000_000.0)
MINUTE_TRADES = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"


class Module:
    """Answers every ask with the same module (one market buy per symbol) and keeps the briefings."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, symbols: tuple[str, ...]) -> None:
        self.text = "\n".join(f"PLAN b{i} ON {s}\nWHEN pos == 0: BUY 3 MKT" for i, s in enumerate(symbols))
        self.briefings: list[str] = []

    @property
    def agent_id(self) -> str:
        return "module"

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        self.briefings.append(request.briefing)
        return AgentReply(self.text)


@functools.cache
def _universe(path: Path) -> Universe:
    return load_universe(path, symbols=list(SYMBOLS)).universe


@functools.cache
def _raw(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    df["day"] = pd.to_datetime(df["date"]).dt.date
    return df[df["symbol"].isin(SYMBOLS)].set_index(["symbol", "day"]).sort_index()


@pytest.fixture
def universe(shared_data: Path) -> Universe:
    return _universe(shared_data / STOCKBENCH)


@pytest.fixture
def raw(shared_data: Path) -> pd.DataFrame:
    """The raw rows of `SYMBOLS`, indexed by (symbol, day): the file as recorded, read by pandas."""
    return _raw(shared_data / STOCKBENCH)


def _next_day(raw: pd.DataFrame, day: dt.date) -> dt.date:
    days: list[dt.date] = sorted({d for _, d in raw.index})
    nxt = days[days.index(day) + 1]
    assert all((s, day) in raw.index and (s, nxt) in raw.index for s in SYMBOLS)  # every symbol trades both
    return nxt


def _fills(result: PortfolioResult) -> dict[str, Filled]:
    entries = result.ledger.entries
    out: dict[str, Filled] = {}
    for sym, e in entries:
        if isinstance(e, Filled):
            assert sym is not None and sym not in out  # one buy per symbol: the position is held
            out[sym] = e
    return out


@pytest.mark.parametrize("day", DAYS)
def test_a_buy_decided_at_the_close_fills_at_the_next_open(universe: Universe, raw: pd.DataFrame,
                                                           day: dt.date) -> None:
    nxt = _next_day(raw, day)
    r = run_portfolio(universe, Module(SYMBOLS), CAPITAL, SessionOptions(cadence="close"), date=nxt, days=2)
    assert [(t.date, t.ordinal) for t in r.turns] == [(day.isoformat(), "CLOSE"), (nxt.isoformat(), "CLOSE")]
    fills = _fills(r)
    assert sorted(fills) == list(SYMBOLS)
    session = next(s for s in universe.sessions if s.date == nxt)
    for sym, f in fills.items():
        assert (f.side, f.qty) == ("buy", 3)
        assert f.price == float(raw.loc[(sym, nxt), "open"]), sym  # D+1's open, whatever the bar did
        assert session.open_ns < f.ts < session.close_ns


@pytest.mark.parametrize("guard", [0, 300])
@pytest.mark.parametrize("day", DAYS)
def test_a_buy_decided_at_the_open_fills_at_that_open(universe: Universe, raw: pd.DataFrame,
                                                      day: dt.date, guard: int) -> None:
    nxt = _next_day(raw, day)
    agent = Module(SYMBOLS)
    r = run_portfolio(universe, agent, CAPITAL, SessionOptions(guard_s=guard), date=nxt)
    session = next(s for s in universe.sessions if s.date == nxt)
    fills = _fills(r)
    assert sorted(fills) == list(SYMBOLS)
    fired = {sym: e for sym, e in r.ledger.entries if isinstance(e, Fired)}
    for sym, f in fills.items():
        assert f.price == float(raw.loc[(sym, nxt), "open"]), sym
        assert fired[sym].ts == session.open_ns  # the turn preceded the opening print: it fired on it
    # the briefing was written on data through D's close: D+1's open price is nowhere in it
    briefing = agent.briefings[0]
    for sym in SYMBOLS:
        o, c = float(raw.loc[(sym, nxt), "open"]), float(raw.loc[(sym, day), "close"])
        if f"{o:.2f}" != f"{c:.2f}":
            assert f"{o:.2f}" not in briefing, (sym, o)


def test_an_arm_latency_applies_the_open_turn_where_it_lands(universe: Universe, raw: pd.DataFrame) -> None:
    day = dt.date(2025, 4, 9)
    session = next(s for s in universe.sessions if s.date == day)
    span = session.close_ns - session.open_ns
    zero = _fills(run_portfolio(universe, Module(SYMBOLS), CAPITAL, SessionOptions(arm_latency=0.0), date=day))
    late = _fills(run_portfolio(universe, Module(SYMBOLS), CAPITAL, SessionOptions(arm_latency=3600.0), date=day))
    assert span // 8 < 3600 * NS_PER_S < span // 4  # an hour lands after the repeated open, before the 1/4 tick
    for sym in SYMBOLS:
        o, h, lo, c = (float(raw.loc[(sym, day), k]) for k in ("open", "high", "low", "close"))
        assert zero[sym].price == o  # no delay: before the opening print, as without a latency
        # an hour in: it fires at the 1/4 tick (low on an up day) and fills at the 1/2 tick
        assert late[sym].price == (h if c >= o else lo), sym
        assert late[sym].ts == session.open_ns + span // 2


def test_only_a_universe_of_daily_bars_takes_the_daily_open(shared_data: Path, universe: Universe) -> None:
    assert daily_bars(universe)
    empty = [s.date for s in universe.sessions if not daily_session(universe, s)]
    assert empty == [dt.date(2025, 1, 10), dt.date(2025, 1, 13)]  # no bar of any symbol: nothing to fill
    minute = load_universe(shared_data / MINUTE_TRADES).universe
    assert not daily_bars(minute) and not any(daily_session(minute, s) for s in minute.sessions)


@pytest.mark.parametrize("cadence", ["open", "close"])
def test_both_engine_paths_and_the_replay_write_one_ledger(universe: Universe, cadence: str) -> None:
    day = dt.date(2025, 4, 10)
    runs = [run_portfolio(universe, Module(SYMBOLS), CAPITAL, SessionOptions(cadence=cadence, engine_path=path),  # type: ignore[arg-type]
                          date=day, days=3) for path in ("auto", "reference")]
    assert runs[0].ledger.to_jsonl() == runs[1].ledger.to_jsonl()
    again = replay(universe, PortfolioCapture.from_json(runs[0].capture.to_json()))
    assert again.ledger.to_jsonl() == runs[0].ledger.to_jsonl()
    assert len(_fills(runs[0])) == len(SYMBOLS)
