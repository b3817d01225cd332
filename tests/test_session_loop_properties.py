"""Properties of the bounded authoring loop over arbitrary reply sequences (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.lang import ast
from kestrel.session.loop import AuthoringLoop, Done, Kernel, LoopPorts, LoopSettings
from kestrel.session.protocol import (
    AgentReply,
    PassTurn,
    StandDownTurn,
    Supersede,
    Usage,
    interpret_reply,
)

PLAN = ast.Plan(
    name="orb",
    rules=(ast.Rule(ast.Compare(">", ast.Series("last"), ast.Number(1.0)), (ast.Flat(),)),),
)
TEXTS: dict[str, object] = {
    "PLAN orb": PLAN,
    "PASS": ast.Pass(),
    "STANDDOWN": ast.StandDown("too wide"),
    "VIEW scout": ast.View("scout", (ast.PaneRef("quote"),)),
    "VIEW peek": ast.View("peek", (ast.PaneRef("orderbook"),)),
}


def _parse(text: str) -> object:
    if text in TEXTS:
        return TEXTS[text]
    raise ValueError(f"cannot parse {text!r}")


def _resolve(view: ast.View) -> object:
    if any(p.name != "quote" for p in view.panes):
        raise ValueError("unknown pane")
    return view


def _briefing(view: object | None, k: Kernel) -> str:
    return f"{k.iteration}"


FAKE_LANGUAGE_ERRORS: tuple[type[Exception], ...] = (ValueError,)  # the fakes' own errors
PORTS = LoopPorts(
    interpret=lambda t: interpret_reply(t, parse=_parse, errors=FAKE_LANGUAGE_ERRORS), resolve_view=_resolve, briefing=_briefing,
    view_errors=FAKE_LANGUAGE_ERRORS,
)

REPLIES = ["PLAN orb", "PASS", "STANDDOWN", "VIEW scout", "VIEW peek", "garbage"]
NON_TERMINAL = {"VIEW scout", "VIEW peek", "garbage"}

replies = st.lists(
    st.tuples(st.sampled_from(REPLIES), st.integers(0, 5000), st.integers(0, 2000)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(script=replies, cap=st.integers(0, 5), budget=st.integers(1, 20000))
def test_loop_invariants(script: list[tuple[str, int, int]], cap: int, budget: int) -> None:
    loop = AuthoringLoop(ordinal="OPEN", ports=PORTS, settings=LoopSettings(cap, budget))
    loop.next_request()
    calls = 0
    spent = 0
    outcome: object = None
    for text, inp, out in script:
        calls += 1
        spent += inp + out
        outcome = loop.receive_reply(AgentReply(text, Usage(input=inp, output=out, cache_read=inp)))
        if isinstance(outcome, Done):
            break
    if not isinstance(outcome, Done):
        return  # the script ran out before the loop ended: nothing more to check
    non_terminal = [t for t, _, _ in script[:calls] if t in NON_TERMINAL]
    last = script[calls - 1][0]
    # the agent is asked at most cap + 1 times; every non-terminal step is one evidence record
    assert calls <= cap + 1
    assert [e.kind for e in loop.evidence] == [
        "view-request" if t.startswith("VIEW") else "repair" for t in non_terminal
    ]
    assert [e.iteration for e in loop.evidence] == list(range(len(non_terminal)))
    assert outcome.tokens_spent == spent
    if last in NON_TERMINAL:
        # ended by exhaustion: a stand-down naming the budget, never a forced plan
        assert isinstance(outcome.turn, StandDownTurn)
        assert "budget exhausted" in outcome.turn.reason
        assert loop.evidence[-1].budget_exhausted
        assert len(non_terminal) > cap or spent >= budget
    else:
        assert not any(e.budget_exhausted for e in loop.evidence)
        expected = {"PLAN orb": Supersede(PLAN), "PASS": PassTurn(), "STANDDOWN": StandDownTurn("too wide")}
        assert outcome.turn == expected[last]
