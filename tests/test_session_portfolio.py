"""Portfolio sessions: a module of plans, each ON its symbol, over a real universe; the turn's
rules (supersede per symbol, PASS, STANDDOWN, a plan without ON refused in a universe); the
capture replays byte for byte; both engine paths give the same ledger; the briefing reads
nothing after its cutoff."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from kestrel.data.universe import load_universe
from kestrel.engine import EngineConfig
from kestrel.engine.ledger import Armed, Disarmed, Filled
from kestrel.frame import Ordinal
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.universe import Member, Universe
from kestrel.session.options import SessionOptions
from kestrel.session.portfolio import (
    PortfolioCapture,
    PortfolioTurn,
    account_briefing,
    frame_briefing,
    read_turn,
    replay,
    run_portfolio,
)
from kestrel.session.protocol import AgentReply, AuthorRequest

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"


class Script:
    """Answers each ask with the next text of a script (then PASS); records the requests."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.requests: list[AuthorRequest] = []

    @property
    def agent_id(self) -> str:
        return "script"

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        self.requests.append(request)
        return AgentReply(self.texts.pop(0) if self.texts else "PASS")


class IterativeScript(Script):
    """A `Script` that enters the authoring loop (its invalid replies are repaired)."""

    iterative: ClassVar[bool] = True


def _universe(shared_data: Path) -> Universe:
    return load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "GS", "MSFT"]).universe


def test_read_turn_rules() -> None:
    syms = ("AAPL", "MSFT")
    t = read_turn("PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT\nPLAN m ON MSFT\nWHEN pos == 0: BUY 2 MKT", syms)
    assert isinstance(t, PortfolioTurn) and [p.instrument for p in t.plans] == ["AAPL", "MSFT"]
    assert read_turn("PLAN a\nWHEN pos == 0: BUY 1 MKT", syms) == (
        "plan a has no ON: in a universe each plan names its symbol, e.g. PLAN a ON AAPL")
    one = read_turn("PLAN a\nWHEN pos == 0: BUY 1 MKT", ("AAPL",))
    assert isinstance(one, PortfolioTurn) and one.plans[0].instrument == "AAPL"
    assert read_turn("PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT\nPLAN b ON AAPL\nWHEN pos == 0: BUY 1 MKT",
                     syms) == "two plans ON AAPL: one plan per symbol"
    assert "no symbol IBM in this session" in str(read_turn("PLAN a ON IBM\nWHEN pos == 0: BUY 1 MKT", syms))
    assert read_turn("PASS", syms) == PortfolioTurn()
    assert read_turn('STANDDOWN "risk off"', syms) == PortfolioTurn(all_down="risk off")


def _session_dates(u: Universe, first: dt.date, n: int) -> tuple[dt.date, int]:
    sessions = [s for s in u.sessions if s.date >= first][:n]
    return sessions[-1].date, len(sessions)


def test_a_module_of_plans_trades_each_symbol_on_one_account_and_replays_byte_for_byte(shared_data: Path) -> None:
    u = _universe(shared_data)
    end, days = _session_dates(u, dt.date(2025, 3, 3), 5)
    opts = SessionOptions(engine=EngineConfig(end_of_day="carry", maxpos=100))
    bounds = PortfolioBounds(capital=10000.0, no_short=True)
    module = ("PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\n"
              "PLAN g ON GS\nWHEN pos == 0: BUY 10 MKT\n"
              "PLAN m ON MSFT\nWHEN pos == 0: SELL 5 MKT")
    agent = Script(module, "PASS", 'STANDDOWN "enough"')
    r = run_portfolio(u, agent, bounds, opts, date=end, days=days, briefing=account_briefing)
    fills = [(s, e.side, e.qty) for s, e in r.ledger.entries if isinstance(e, Filled)]
    assert fills[:2] == [("AAPL", "buy", 10), ("GS", "buy", 10)]
    rejects = [e.reason for s, e in r.ledger.entries if s == "MSFT" and hasattr(e, "reason") and "no-short" in e.reason]
    assert rejects and rejects[0] == "no-short: MSFT would reach -5"
    assert [t.applied for t in r.turns[:3]] == ["armed a on AAPL; armed g on GS; armed m on MSFT", "passed",
                                                 "all stood down: enough"]
    # the agent saw the account in its briefing: no cash spent at the first open, then the buys
    assert "ACCOUNT USD cash 10000.00" in agent.requests[0].briefing
    assert "AAPL last" in agent.requests[1].briefing and "pos 10" in agent.requests[1].briefing
    data = r.capture.to_json()
    again = replay(u, PortfolioCapture.from_json(data))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()
    # the reference path gives the same bytes
    ref = run_portfolio(u, Script(module, "PASS", 'STANDDOWN "enough"'), bounds,
                        msgspec.structs.replace(opts, engine_path="reference"), date=end, days=days)
    assert ref.ledger.to_jsonl() == r.ledger.to_jsonl()


def test_a_plan_supersedes_only_its_own_symbol(shared_data: Path) -> None:
    u = _universe(shared_data)
    end, days = _session_dates(u, dt.date(2025, 3, 3), 1)
    opts = SessionOptions(engine=EngineConfig(maxpos=100), checkpoints=("12:00",))
    first = "PLAN a ON AAPL\nWHEN last < 1: BUY 1 MKT\nPLAN g ON GS\nWHEN last < 1: BUY 1 MKT"
    second = "PLAN a2 ON AAPL\nWHEN last < 2: BUY 1 MKT"
    r = run_portfolio(u, Script(first, second), PortfolioBounds(capital=10000.0), opts, date=end, days=days)
    disarms = [(s, e.plan, e.reason) for s, e in r.ledger.entries if isinstance(e, Disarmed)]
    assert ("AAPL", "a", "superseded by a2") in disarms
    assert not any(s == "GS" and "superseded" in reason for s, _, reason in disarms)
    armed = [(s, e.plan) for s, e in r.ledger.entries if isinstance(e, Armed)]
    assert armed == [("AAPL", "a"), ("GS", "g"), ("AAPL", "a2")]


def test_a_plan_without_on_is_sent_back_with_the_fix_then_the_repair_arms(shared_data: Path) -> None:
    u = _universe(shared_data)
    end, days = _session_dates(u, dt.date(2025, 3, 3), 1)
    agent = IterativeScript("PLAN a\nWHEN pos == 0: BUY 1 MKT", "PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT")
    r = run_portfolio(u, agent, PortfolioBounds(capital=10000.0), SessionOptions(engine=EngineConfig(maxpos=10)),
                      date=end, days=days)
    assert agent.requests[1].repair_error == "plan a has no ON: in a universe each plan names its symbol, e.g. PLAN a ON AAPL"
    assert r.turns[0].repairs == 1 and r.turns[0].applied == "armed a on AAPL"


def test_the_briefing_reads_nothing_after_its_cutoff(shared_data: Path) -> None:
    u = _universe(shared_data)
    r = run_portfolio(u, Script("PASS"), PortfolioBounds(capital=10000.0), SessionOptions(),
                      date=dt.date(2025, 3, 3), days=1)
    state = r.engine.state()
    for k in range(5, len(u.sessions), 17):
        cut = u.sessions[k].open_ns - 30 * 1_000_000_000
        cut_u = Universe(tuple(_until(m, cut) for m in u.members), u.sessions, u.calendar)
        d = u.sessions[k].date
        o = Ordinal(0, "OPEN", u.sessions[k].open_ns)
        assert account_briefing(u, o, cut, state, d) == account_briefing(cut_u, o, cut, state, d)
        assert frame_briefing(u, o, cut, state, d) == frame_briefing(cut_u, o, cut, state, d)


def _until(m: Member, cut: int) -> Member:
    """`m` with no tick after `cut`."""
    return Member(m.symbol, m.data.until(cut), m.adjusted.until(cut), m.lot_size, m.factor_rows, m.missing)


def test_missing_sessions_in_a_universe_run(shared_data: Path) -> None:
    """AAPL has no bars 2025-02-11 to 02-19: it fills nothing there while the others trade."""
    u = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "MSFT"]).universe
    assert dt.date(2025, 2, 12) in u["AAPL"].missing
    agent = Script(*["PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT\nPLAN m ON MSFT\nWHEN pos == 0: BUY 1 MKT"] * 3)
    r = run_portfolio(u, agent, PortfolioBounds(capital=100000.0),
                      SessionOptions(engine=EngineConfig(maxpos=10), universe_end_of_day="flatten"),  # a buy each day
                      date=dt.date(2025, 2, 13), days=3)
    sessions = {s.date: s for s in u.sessions}
    for day in (dt.date(2025, 2, 11), dt.date(2025, 2, 12), dt.date(2025, 2, 13)):
        o, c = sessions[day].open_ns, sessions[day].close_ns
        by = {s for s, e in r.ledger.entries if isinstance(e, Filled) and o <= e.ts <= c}
        assert "AAPL" not in by and "MSFT" in by


def test_run_session_takes_a_universe(shared_data: Path) -> None:
    from kestrel.session.runner import run_session

    u = _universe(shared_data)
    r = run_session(u, Script("PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT"), SessionOptions(engine=EngineConfig(maxpos=10)),
                    date=dt.date(2025, 3, 3), bounds=PortfolioBounds(capital=5000.0))
    assert [s for s, e in r.ledger.entries if isinstance(e, Filled)][0] == "AAPL"
    assert r.capture.bounds.capital == 5000.0 and r.capture.dates == ("2025-03-03",)


def test_a_turn_holds_a_plan_for_each_of_twenty_symbols_and_checks_each_lot() -> None:
    syms = tuple(f"S{k:02d}" for k in range(20))
    text = "\n".join(f"PLAN p{k} ON {s}\nWHEN pos == 0: BUY 1 MKT" for k, s in enumerate(syms))
    t = read_turn(text, syms)
    assert isinstance(t, PortfolioTurn) and len(t.plans) == 20
    lots = {"BTC": 0.0001, "AAPL": 1.0}
    ok = read_turn("PLAN b ON BTC\nWHEN pos == 0: BUY 0.0003 MKT", ("AAPL", "BTC"), lots)
    assert isinstance(ok, PortfolioTurn) and ok.plans[0].rules[0].actions[0].qty == 0.0003  # type: ignore[union-attr]
    bad = read_turn("PLAN a ON AAPL\nWHEN pos == 0: BUY 0.5 MKT", ("AAPL", "BTC"), lots)
    assert isinstance(bad, str) and bad.startswith("plan a ON AAPL: ")


def test_standdown_on_a_symbol_stands_only_that_one_down() -> None:
    syms = ("AAPL", "MSFT")
    assert read_turn('STANDDOWN ON AAPL "earnings"', syms) == PortfolioTurn(stand_down=("AAPL",))
    assert "no symbol IBM in this session" in str(read_turn("STANDDOWN ON IBM", syms))
    both = read_turn("STANDDOWN ON MSFT\nPLAN a ON AAPL\nWHEN pos == 0: BUY $5000 MKT", syms)
    assert isinstance(both, PortfolioTurn) and both.stand_down == ("MSFT",) and both.plans[0].instrument == "AAPL"


def test_a_module_with_standdown_on_one_symbol_in_a_session(shared_data: Path) -> None:
    u = _universe(shared_data)
    opts = SessionOptions(engine=EngineConfig(maxpos=100), checkpoints=("12:00",))
    first = "PLAN a ON AAPL\nWHEN last < 1: BUY 1 MKT\nPLAN g ON GS\nWHEN last < 1: BUY 1 MKT"
    r = run_portfolio(u, Script(first, "STANDDOWN ON GS"), PortfolioBounds(capital=10000.0), opts,
                      date=dt.date(2025, 3, 3), days=1)
    downs = [(s, e.reason) for s, e in r.ledger.entries if isinstance(e, Disarmed)]
    assert ("GS", "stand down requested by the agent") in downs
    assert not any(s == "AAPL" and reason == "stand down requested by the agent" for s, reason in downs)
    assert r.turns[1].applied == "GS stood down"
