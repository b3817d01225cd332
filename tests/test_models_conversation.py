"""The per-ordinal conversation (pure) and the run cost roll-up."""

from __future__ import annotations

import pytest

from kestrel.models.conversation import Conversation, Message, follow_up
from kestrel.models.cost import dollars, run_cost
from kestrel.session.loop import Evidence, EvidenceKind
from kestrel.session.protocol import AuthorRequest, Usage
from kestrel.session.runner import OrdinalOutcome
from kestrel.session.protocol import PassTurn

BRIEF = "CLOCK t\nBUDGET 2 view requests or repairs left, 5000 tokens left\nREPLY ...\n\nVIEW default budget 900\nquote"


def req(iteration: int, repair: str | None = None, briefing: str = BRIEF, ordinal: str = "OPEN") -> AuthorRequest:
    return AuthorRequest(ordinal=ordinal, iteration=iteration, briefing=briefing, repair_error=repair)


def test_conversation_accumulates_and_restarts_per_ordinal() -> None:
    c = Conversation()
    g, m = c.ask(req(0))
    assert m == (Message("user", BRIEF),)
    c.answer(g, "VIEW v: quote")
    g, m = c.ask(req(1, briefing="NEW BRIEFING"))
    assert [x.content for x in m] == [BRIEF, "VIEW v: quote", "NEW BRIEFING"]
    c.answer(g, "  ")
    g, m = c.ask(req(2, repair="line 1: bad"))
    assert m[3] == Message("assistant", "(empty reply)")
    assert m[4].content.startswith("Your reply was not accepted:\nline 1: bad")
    assert "BUDGET 2 view requests or repairs left, 5000 tokens left" in m[4].content
    g2, m = c.ask(req(0, ordinal="11:00"))
    assert m == (Message("user", BRIEF),) and g2 == g + 1
    c.answer(g, "late answer of the abandoned call")  # an older generation: dropped
    _, m = c.ask(req(1, repair="x"))
    assert [x.role for x in m] == ["user", "user"]


def test_follow_up_without_budget_line() -> None:
    assert follow_up(req(1, repair="oops", briefing="no budget")).splitlines() == [
        "Your reply was not accepted:", "oops", "", "Reply with exactly one statement: PLAN, VIEW, STANDDOWN or PASS."]


def ev(kind: EvidenceKind, usage: Usage, latency: float | None, iteration: int = 0) -> Evidence:
    return Evidence(ordinal="OPEN", iteration=iteration, kind=kind, model="gpt-4o", usage=usage,
                    budget_exhausted=False, latency_ms=latency, date="2024-04-15")


def test_run_cost_rolls_up_calls_and_counts_a_timed_out_call_once() -> None:
    u1, u2 = Usage(input=1000, output=50, cache_read=400), Usage(input=1200, output=20)
    records = [ev("view-request", u1, 10.0), ev("model-note", Usage(), None),
               ev("agent-error", Usage(), None, 1), ev("late-reply", u2, 1500.0, 1)]
    outcome = OrdinalOutcome(date="2024-04-15", ordinal="OPEN", turn=PassTurn(), iterations=1,
                             tokens_spent=1050, evidence=4, escalations=0, armed="passed")
    cost = run_cost("openai:gpt-4o", records, [outcome])
    assert [c["kind"] for c in cost["calls"]] == ["view-request", "late-reply"]
    total = cost["total"]
    assert (total["calls"], total["input"], total["output"], total["cache_read"]) == (2, 2200, 70, 400)
    d1, d2 = dollars("openai", "gpt-4o", u1), dollars("openai", "gpt-4o", u2)
    assert d1 is not None and d2 is not None
    # gpt-4o list prices: $2.50/M input, $1.25/M cached input, $10/M output
    assert d1 == pytest.approx((600 * 2.5 + 400 * 1.25 + 50 * 10) / 1e6)
    assert total["usd"] == pytest.approx(d1 + d2)
    assert cost["ordinals"][0]["tokens"] == 1050
    assert run_cost("replies:x", records, [outcome])["total"]["usd"] is None
