"""The portfolio turn goes through the authoring loop: a VIEW's panes are in the next request's
briefing under the same cutoff, every non-terminal step is evidence (to the sink too), a bad
module is repaired with its error, a plan over a symbol's bound is reviewed naming its plan and
symbol, the profile's budgets end the loop in a stand-down of every symbol, an agent's failure
stands every symbol down; the capture replays the ledger byte for byte. On the shared
StockBench universe (skipped when absent) and on generated universes."""

from __future__ import annotations

import datetime as dt
import random
import re
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest

from kestrel.data.universe import load_universe
from kestrel.engine import EngineConfig
from kestrel.engine.ledger import Armed, Disarmed, Filled
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.universe import Universe
from kestrel.session.loop import Evidence, LoopSettings
from kestrel.session.options import SessionOptions
from kestrel.session.portfolio import ModuleAgent, PortfolioCapture, replay, run_portfolio
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage
from kestrel.session.runner import run_session

from portfolio_cases import random_universe

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
MODULE = "PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\nPLAN m ON MSFT\nWHEN pos == 0: BUY 5 MKT"
BOUNDS = PortfolioBounds(capital=10000.0, max_open=2, no_short=True)


class Scripted:
    """An iterative agent answering each request with the next text of its script (then PASS),
    each call spending `spend` tokens (input 100 then the rest as output); keeps the requests.
    A text `!raise` raises instead."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, *texts: str, spend: int = 120) -> None:
        self.texts = list(texts)
        self.spend = spend
        self.requests: list[AuthorRequest] = []

    @property
    def agent_id(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "script-model"

    def author(self, request: AuthorRequest) -> AgentReply:
        self.requests.append(request)
        text = self.texts.pop(0) if self.texts else "PASS"
        if text == "!raise":
            raise RuntimeError("boom")
        return AgentReply(text, usage=Usage(input=100, output=self.spend - 100))


def _stockbench(shared_data: Path) -> Universe:
    return load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "GS", "MSFT"]).universe


def _raw_close(shared_data: Path, symbol: str, day: str) -> float:
    """The file's own close of `symbol` on `day` (read with pyarrow, not through Kestrel)."""
    rows = pq.read_table(shared_data / STOCKBENCH).to_pylist()
    for r in rows:
        if r["symbol"] == symbol and str(r["date"])[:10] == day:
            return float(r["close"])
    raise AssertionError(f"no {symbol} row on {day}")


def _options(cap: int = 4, budget: int = 5000, checkpoints: tuple[str, ...] = (),
             eod: str = "flatten") -> SessionOptions:
    return SessionOptions(engine=EngineConfig(maxpos=100, end_of_day=eod),  # type: ignore[arg-type]
                          settings=LoopSettings(view_request_cap=cap, authoring_token_budget=budget),
                          checkpoints=checkpoints)


def test_a_view_then_a_module_through_the_loop_on_stockbench(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    agent = Scripted("VIEW v: bars(AAPL, 1d, 20), watchlist", MODULE)
    seen: list[Evidence] = []
    r = run_session(u, agent, _options(), date=dt.date(2025, 3, 3), bounds=BOUNDS, sink=seen.append)
    first, second = agent.requests
    # the first briefing: the kernel panes with the account's bounds and the budget, the default view
    assert "BUDGET 4 view requests or repairs left, 5000 tokens left" in first.briefing
    assert "account capital 10000 gross 1x open 2 session_maxloss none shorts no" in first.briefing
    assert "VIEW default budget" in first.briefing and "BARS" not in first.briefing
    # the second: the view asked for, with what the first call spent taken off the budget
    assert second.view_name == "v" and second.repair_error is None
    assert "VIEW v budget" in second.briefing and "BARS AAPL 1d last " in second.briefing and "WATCHLIST 3" in second.briefing
    assert "BUDGET 3 view requests or repairs left, 4880 tokens left" in second.briefing
    # the bars end at the last close before the session: the file's own AAPL close of 02-28
    close = _raw_close(shared_data, "AAPL", "2025-02-28")
    bar_lines = [line for line in second.briefing.splitlines() if line.startswith("02-28 ")]
    assert bar_lines and float(bar_lines[0].split()[4]) == pytest.approx(close)
    assert not any(line.startswith("03-03 ") for line in second.briefing.splitlines())
    # the typed facts ride along: every member, the account's bounds
    assert first.universe is not None and [m.symbol for m in first.universe.members] == ["AAPL", "GS", "MSFT"]
    assert first.universe.portfolio_bounds == BOUNDS
    assert first.universe.members[0].last == pytest.approx(close)
    # evidence: the view request, to the sink as to the result
    assert [e.kind for e in r.evidence] == ["view-request"]
    v = r.evidence[0]
    assert (v.panes, v.view, v.date, v.ordinal, v.model) == (("bars", "watchlist"), "VIEW v: bars(AAPL, 1d, 20), watchlist",
                                                             "2025-03-03", "OPEN", "script-model")
    assert seen == r.evidence
    # the module is what is armed and captured; the view changed nothing in the market
    assert r.turns[0].applied == "armed a on AAPL; armed m on MSFT" and r.turns[0].text == MODULE
    direct = run_portfolio(u, ModuleAgent(MODULE), BOUNDS, _options(), date=dt.date(2025, 3, 3))
    assert r.ledger.to_jsonl() == direct.ledger.to_jsonl()
    assert [(s, e.qty) for s, e in r.ledger.entries if isinstance(e, Filled)][:2] == [("AAPL", 10), ("MSFT", 5)]
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl() and again.capture.to_json() == r.capture.to_json()


def test_a_bad_module_is_repaired_with_its_error(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    bad = "PLAN a\nWHEN pos == 0: BUY 1 MKT"
    mixed = "VIEW w: watchlist\nPLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT"
    agent = Scripted(bad, mixed, "PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT")
    r = run_portfolio(u, agent, BOUNDS, _options(), date=dt.date(2025, 3, 3))
    fix = "plan a has no ON: in a universe each plan names its symbol, e.g. PLAN a ON AAPL"
    assert agent.requests[1].repair_error == fix
    assert agent.requests[2].repair_error is not None and agent.requests[2].repair_error.startswith(
        "a VIEW goes alone in its reply")
    repairs = [e for e in r.evidence if e.kind == "repair"]
    assert [(e.iteration, e.error, e.text) for e in repairs][0] == (0, fix, bad)
    assert len(repairs) == 2 and r.turns[0].repairs == 2 and r.turns[0].applied == "armed a on AAPL"
    assert "BUDGET 2 view requests or repairs left" in agent.requests[2].briefing


def test_a_plan_over_its_symbols_bound_is_reviewed_naming_plan_and_symbol(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    over = "PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\nPLAN m ON MSFT\nWHEN pos == 0: BUY 500 MKT"
    agent = Scripted(over, MODULE)
    r = run_portfolio(u, agent, BOUNDS, _options(), date=dt.date(2025, 3, 3))
    error = agent.requests[1].repair_error
    assert error is not None and error.startswith("bound check: plan m ON MSFT: rule 1 (BUY 500): size over maxpos 100")
    assert "plan a ON AAPL" not in error
    assert [e.kind for e in r.evidence] == ["bound-check"] and r.turns[0].applied == "armed a on AAPL; armed m on MSFT"


def test_the_view_request_cap_stands_every_symbol_down_and_replays(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    agent = Scripted(MODULE, "VIEW v: quote(AAPL)", "VIEW w: quote(MSFT)")
    r = run_portfolio(u, agent, BOUNDS, _options(cap=1, checkpoints=("12:00",)), date=dt.date(2025, 3, 3))
    assert len(agent.requests) == 3  # OPEN: the module; 12:00: one view, then the cap
    assert "QUOTE AAPL" in agent.requests[2].briefing
    reason = ("authoring budget exhausted after a view request: view_request_cap 1 reached "
              "(bounded authoring loop, fail-closed stand-down)")
    assert r.turns[1].applied == f"all stood down: {reason}"
    assert r.turns[1].text == f'STANDDOWN "{reason}"\n'
    downs = {(s, e.reason) for s, e in r.ledger.entries if isinstance(e, Disarmed)}
    assert {("AAPL", reason), ("MSFT", reason)} <= downs
    last = r.evidence[-1]
    assert (last.kind, last.budget_exhausted, last.ordinal, last.iteration) == ("view-request", True, "12:00", 1)
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()


def test_the_token_budget_stands_every_symbol_down(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    agent = Scripted("VIEW v: watchlist", MODULE, spend=3000)
    r = run_portfolio(u, agent, BOUNDS, _options(budget=2000), date=dt.date(2025, 3, 3))
    assert len(agent.requests) == 1
    assert r.turns[0].applied == ("all stood down: authoring budget exhausted after a view request: "
                                  "authoring_token_budget 2000 spent (3000 tokens) (bounded authoring loop, "
                                  "fail-closed stand-down)")
    assert not any(isinstance(e, Filled) for _, e in r.ledger.entries)


def test_standdown_of_one_symbol_after_a_view(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    module = "PLAN a ON AAPL\nWHEN last < 1: BUY 1 MKT\nPLAN g ON GS\nWHEN last < 1: BUY 1 MKT"
    agent = Scripted(module, "VIEW q: quote(GS)", 'STANDDOWN ON GS "earnings"')
    r = run_portfolio(u, agent, BOUNDS, _options(checkpoints=("12:00",)), date=dt.date(2025, 3, 3))
    assert r.turns[1].applied == "GS stood down" and r.turns[1].text == 'STANDDOWN ON GS "earnings"'
    downs = [(s, e.reason) for s, e in r.ledger.entries if isinstance(e, Disarmed)]
    assert ("GS", "stand down requested by the agent") in downs
    assert not any(s == "AAPL" and reason == "stand down requested by the agent" for s, reason in downs)
    assert [e.kind for e in r.evidence] == ["view-request"] and r.evidence[0].ordinal == "12:00"


def test_an_agent_failure_stands_every_symbol_down(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    agent = Scripted(MODULE, "!raise")
    r = run_portfolio(u, agent, BOUNDS, _options(checkpoints=("12:00",)), date=dt.date(2025, 3, 3))
    reason = "agent failed: RuntimeError: boom (fail-closed stand-down)"
    assert r.turns[1].applied == f"all stood down: {reason}"
    assert [(e.kind, e.error) for e in r.evidence] == [("agent-error", "RuntimeError: boom")]
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()


def _module_of(u: Universe, rng: random.Random) -> str:
    return "\n".join(f"PLAN p{k} ON {s}\nWHEN pos == 0: {rng.choice(['BUY', 'SELL'])} {rng.randrange(1, 4)} MKT"
                     for k, s in enumerate(u.symbols))


@pytest.mark.parametrize("seed", range(10))
def test_a_view_then_a_module_on_generated_universes(seed: int) -> None:
    rng = random.Random(seed)
    u = random_universe(rng)
    module = _module_of(u, rng)
    sym = u.symbols[-1]
    days = len(u.sessions)
    opts = _options(eod="carry")
    agent = Scripted(*[t for _ in range(days) for t in (f"VIEW v: quote({sym}), portfolio", module)])
    r = run_portfolio(u, agent, BOUNDS, opts, date=u.sessions[-1].date, days=days)
    assert len(agent.requests) == 2 * days
    for k in range(days):
        shown = agent.requests[2 * k + 1]
        assert shown.view_name == "v" and f"QUOTE {sym}" in shown.briefing and "PORTFOLIO USD" in shown.briefing
        assert re.search(r"^CLOCK \d+ symbols", shown.briefing, re.M)
    assert [e.kind for e in r.evidence] == ["view-request"] * days
    assert [e.date for e in r.evidence] == [s.date.isoformat() for s in u.sessions]
    # the view changes nothing: the ledger is the module's alone, and the capture replays it
    direct = run_portfolio(u, ModuleAgent(module), BOUNDS, opts, date=u.sessions[-1].date, days=days)
    assert r.ledger.to_jsonl() == direct.ledger.to_jsonl()
    armed = [s for s, e in r.ledger.entries if isinstance(e, Armed)]
    assert armed[: len(u.symbols)] == list(u.symbols)
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()


@pytest.mark.parametrize("seed", range(6))
def test_a_generated_universe_repairs_a_plan_without_on(seed: int) -> None:
    rng = random.Random(100 + seed)
    u = random_universe(rng)
    bare = "PLAN p\nWHEN pos == 0: BUY 1 MKT"
    agent = Scripted(bare, f"PLAN p ON {u.symbols[0]}\nWHEN pos == 0: BUY 1 MKT")
    r = run_portfolio(u, agent, BOUNDS, _options(), date=u.sessions[0].date)
    if len(u.symbols) == 1:  # one symbol: a plan without ON is that symbol's
        assert len(agent.requests) == 1 and r.turns[0].applied == f"armed p on {u.symbols[0]}"
    else:
        assert agent.requests[1].repair_error == (
            f"plan p has no ON: in a universe each plan names its symbol, e.g. PLAN p ON {u.symbols[0]}")
        assert [e.kind for e in r.evidence] == ["repair"] and r.turns[0].applied == f"armed p on {u.symbols[0]}"


def test_a_rejection_is_told_in_the_next_briefing(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    module = "PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT\nPLAN m ON MSFT\nWHEN pos == 0: SELL 5 MKT"
    agent = Scripted(module, "PASS", "PASS")
    r = run_portfolio(u, agent, BOUNDS, _options(checkpoints=("12:00",)), date=dt.date(2025, 3, 4), days=2)
    rejected = [e for s, e in r.ledger.entries if s == "MSFT" and getattr(e, "reason", "") == "no-short: MSFT would reach -5"]
    assert rejected
    assert "since last turn: none" in agent.requests[0].briefing
    told = agent.requests[1].briefing
    assert "since last turn: 1 rejected" in told and "no-short: MSFT would reach -5" in told
    # told once: the next briefing has the session's close disarms (the engine's), not the rejection again
    assert "no-short" not in agent.requests[2].briefing


def _profile_options(name: str) -> SessionOptions:
    from kestrel.session.profiles import Flags, lookup, resolve

    r = resolve(Flags(), None, lookup(name))
    return SessionOptions(engine=EngineConfig(maxpos=100), settings=LoopSettings.of(r.settings), policy=r.policy,
                          profile=r.profile)


def test_the_fast_profile_bounds_the_loop_and_is_in_the_evidence(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    agent = Scripted("VIEW v: watchlist", "VIEW w: quote(AAPL)", MODULE)
    r = run_portfolio(u, agent, BOUNDS, _profile_options("fast"), date=dt.date(2025, 3, 3))
    assert [q.effort for q in agent.requests] == ["low", "low"]
    assert "BUDGET 1 view requests or repairs left, 4000 tokens left" in agent.requests[0].briefing
    assert r.turns[0].applied.startswith("all stood down: authoring budget exhausted after a view request: "
                                         "view_request_cap 1 reached")
    assert [(e.kind, e.profile) for e in r.evidence] == [("view-request", "fast")] * 2


def test_the_thorough_profile_self_corrects_a_module_naming_its_plan(shared_data: Path) -> None:
    u = _stockbench(shared_data)
    stopped = ("PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT STOP -2%\n"
               "PLAN m ON MSFT\nWHEN pos == 0: BUY 5 MKT STOP -2%")
    agent = Scripted(MODULE, stopped)
    r = run_portfolio(u, agent, BOUNDS, _profile_options("thorough"), date=dt.date(2025, 3, 3))
    error = agent.requests[1].repair_error
    assert error is not None and error.startswith("self-correction: the plan is classified ")
    assert "plan a ON AAPL: rule 1" in error and "plan m ON MSFT: rule 1" in error
    assert [e.kind for e in r.evidence] == ["self-correction"] and agent.requests[0].effort == "high"
    assert r.turns[0].text == stopped and r.turns[0].repairs == 1
