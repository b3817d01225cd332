"""Blind mode and the loop's re-asks: a bound check's findings reach a blind agent in the scale
of its briefing (money in the blind scale, no real amount, symbol or price level), over one
symbol and over a universe; the engine still checks the real plan against the real bounds."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import ClassVar

from kestrel.data.sample import load_sample
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe
from kestrel.session.options import SessionOptions
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage
from kestrel.session.runner import run_session

SAMPLE = load_sample()
FIRST = float(SAMPLE.ticks.last[0])  # the blind scale puts the first price at 100


class OverBound:
    """Iterative: answers the first ask of an ordinal with `plan`, a re-ask with PASS; keeps
    every request it reads."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False
    agent_id = "over-bound"
    model = "over-bound"

    def __init__(self, plan: str) -> None:
        self.plan = plan
        self.seen: list[AuthorRequest] = []

    def author(self, request: AuthorRequest) -> AgentReply:
        self.seen.append(request)
        return AgentReply("PASS" if request.repair_error else self.plan, Usage(), latency_ms=1.0)

    def findings(self) -> list[str]:
        return [r.repair_error for r in self.seen if r.repair_error and r.repair_error.startswith("bound check:")]


PLAN = "PLAN p\nWHEN last > 1: BUY 5000 MKT STOP -5%"
_LOSS = re.compile(r"worst-case loss (\d+\.\d+) reaches maxloss ([\d.]+)")


def _rules_maxloss(briefing: str) -> float:
    found = re.search(r"maxloss (\d+(?:\.\d+)?)", briefing.split("RULES", 1)[1])
    assert found, briefing
    return float(found.group(1))


def test_a_blind_bound_check_reads_money_in_the_briefings_scale() -> None:
    real, blind = OverBound(PLAN), OverBound(PLAN)
    run_session(SAMPLE, real, SessionOptions())
    run_session(SAMPLE, blind, SessionOptions(blind=True))
    (real_text, *_), (blind_text, *_) = real.findings(), blind.findings()
    real_loss, real_cap = map(float, _LOSS.findall(real_text)[0])
    blind_loss, blind_cap = map(float, _LOSS.findall(blind_text)[0])
    assert real_cap == 1000  # the operator's default, in dollars
    assert abs(blind_cap - 1000 * 100 / FIRST) < 0.01 and abs(blind_loss - real_loss * 100 / FIRST) < 0.01
    assert blind_cap == _rules_maxloss(blind.seen[0].briefing)  # the bound the agent was told
    assert f"maxloss {real_cap:g}" not in blind_text and f"{real_loss:.2f}" not in blind_text
    assert SAMPLE.symbol not in blind_text


def _universe() -> Universe:
    t = SAMPLE.ticks
    other = MarketData("OTHER", SAMPLE.tick_size, Ticks(t.ts, t.bid * 3, t.ask * 3, t.last * 3, t.size),
                       SAMPLE.sessions, instrument=Instrument(symbol="OTHER", tick_size=SAMPLE.tick_size))
    members = tuple(Member(d.symbol, d, d, Decimal(1)) for d in (other, SAMPLE))
    return Universe(members, SAMPLE.sessions, "XNYS")


def test_a_blind_universe_bound_check_names_no_real_symbol_or_amount() -> None:
    universe = _universe()
    plans = "\n\n".join(f"PLAN {s.lower()} ON {s} RISK maxloss 900\nWHEN last > 1: BUY 5000 MKT STOP -5%"
                        for s in ("SYM1", "SYM2"))
    agent = OverBound(plans)
    run_session(universe, agent, SessionOptions(blind=True), bounds=PortfolioBounds(capital=10_000_000))
    texts = agent.findings()
    assert texts and all("ON SYM1" in t and "ON SYM2" in t for t in texts)
    for text in texts:
        assert "SAMPLE" not in text and "OTHER" not in text, text
        assert "maxloss 1000" not in text, text  # the real dollar bound would give the scale away
