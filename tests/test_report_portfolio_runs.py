"""The portfolio report over real runs of the portfolio engine: the account marked at every
merged tick by the report (from fills, positions, splits and dividends alone) agrees with every
`account` line the engine wrote, over random universes, bounds, configs and plans and over the
StockBench universe; the symbols' attribution adds up to the run's net PnL."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from kestrel.data.universe import load_universe
from kestrel.engine import EngineConfig
from kestrel.engine.portfolio import run_universe
from kestrel.market.portfolio import PortfolioBounds
from kestrel.report.portfolio import from_portfolio_run, portfolio_report, to_json
from kestrel.report.portfolio_page import render_portfolio

from engine_helpers import plan
from html_pages import assert_offline
from portfolio_cases import random_run
from universe_support import STOCKBENCH


@pytest.mark.parametrize("seed", range(60))
def test_the_marked_account_agrees_with_every_account_line_of_random_runs(seed: int) -> None:
    pe = random_run(random.Random(seed), "auto")
    rep = portfolio_report(pe.universe, pe.ledger.to_jsonl(), pe.bounds.capital, configs=pe.configs)
    assert rep.account_lines == len(pe.ledger.accounts()) > 0
    assert rep.account_mismatches == 0, rep.first_mismatch
    quantum = 10.0**-rep.decimals
    assert abs(sum(a.pnl for a in rep.attribution) - rep.figures.net_pnl) <= quantum * len(rep.attribution) + 1e-9
    last = pe.ledger.accounts()[-1]
    assert abs(rep.figures.final_equity - last.equity) <= quantum / 2 + 1e-9


def test_a_stockbench_run_reports_and_agrees_with_the_engine(shared_data: Path) -> None:
    universe = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "GS", "MSFT", "JPM", "HD"]).universe
    sessions = [s for s in universe.sessions if dt.date(2025, 2, 3) <= s.date <= dt.date(2025, 2, 28)]
    text = ("PLAN p{k} ON {sym} FOR 5d RISK maxpos 100\n"
            "WHEN last > sma(last, 3) AND pos <= 0: BUY 20 MKT x5\n"
            "WHEN last < sma(last, 3) AND pos > 0: FLAT x5")
    plans = {s: plan(text.format(k=k, sym=s)) for k, s in enumerate(universe.symbols)}
    configs = {s: EngineConfig(end_of_day="carry") for s in universe.symbols}
    bounds = PortfolioBounds(capital=100_000.0)
    pe = run_universe(universe, configs, bounds, plans, sessions=sessions)
    ledger = pe.ledger.to_jsonl()
    rep = portfolio_report(universe, ledger, 100_000.0, [s.date for s in sessions], configs=configs)
    assert rep.fills > 0 and rep.account_mismatches == 0, rep.first_mismatch
    assert [s.date for s in rep.sessions] == [s.date.isoformat() for s in sessions]
    assert rep.sessions[-1].equity == rep.figures.final_equity == pe.ledger.accounts()[-1].equity
    doc = to_json(rep)
    assert sum(a["pnl"] for a in doc["attribution"]) == pytest.approx(doc["metrics"]["net_pnl"], abs=0.05)
    page = render_portfolio(rep)
    assert_offline(page)
    assert page == render_portfolio(portfolio_report(universe, ledger, 100_000.0, [s.date for s in sessions],
                                                     configs=configs))


def test_a_portfolio_session_with_an_agent_reports_from_its_result(shared_data: Path) -> None:
    from kestrel.session.options import SessionOptions
    from kestrel.session.portfolio import ModuleAgent, run_portfolio

    universe = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "GS", "MSFT"]).universe
    module = ("PLAN a ON AAPL FOR 5d\nWHEN pos == 0: BUY 10 MKT\n"
              "PLAN g ON GS FOR 5d\nWHEN pos == 0: BUY 3 MKT\n"
              "PLAN m ON MSFT FOR 5d\nWHEN pos == 0: SELL 5 MKT")
    opts = SessionOptions(engine=EngineConfig(end_of_day="carry", maxpos=100))
    result = run_portfolio(universe, ModuleAgent(module, "hold"), PortfolioBounds(capital=20_000.0), opts,
                           date=dt.date(2025, 3, 7), days=5)
    rep = from_portfolio_run(result.engine, result.capture.dates)
    assert rep.account_lines > 0 and rep.account_mismatches == 0, rep.first_mismatch
    state = result.engine.state()
    assert abs(rep.figures.final_equity - state.equity) <= 0.005
    assert [a.final_position for a in rep.attribution] == [float(h.position) for h in state.holdings]
    assert [a.symbol for a in rep.attribution] == ["AAPL", "GS", "MSFT"]
    assert rep.attribution[2].final_position < 0 and rep.attribution[2].final_value < 0  # the MSFT short
