"""The bounded authoring loop: every branch pinned with exact evidence records.

The language and the catalog are stood in for by tiny hand-written fakes (a table of texts to
ASTs, a set of known panes) so each branch is exercised in isolation."""

from __future__ import annotations

import pytest

from kestrel.agents.scripted import Raise, ScriptedAgent, ScriptError
from kestrel.lang import ast
from kestrel.session.drive import author_turn
from kestrel.session.loop import (
    AuthoringLoop,
    Done,
    Evidence,
    EvidenceKind,
    Kernel,
    LoopError,
    LoopPorts,
    LoopSettings,
)
from kestrel.session.protocol import (
    AgentReply,
    AuthorRequest,
    AuthorStep,
    Invalid,
    PassTurn,
    RequestView,
    StandDownTurn,
    Supersede,
    TurnReply,
    Usage,
    interpret_reply,
)

PLAN = ast.Plan(
    name="orb",
    rules=(
        ast.Rule(
            cond=ast.Compare(">", ast.Series("last"), ast.Call("high", (ast.Duration(30, "m"),))),
            actions=(ast.Order("buy", 100, "mkt", stop=ast.Offset("pct", -0.6)),),
        ),
    ),
)
SCOUT = ast.View("scout", (ast.PaneRef("quote"), ast.PaneRef("bars")), budget=600)
BAD_VIEW = ast.View("peek", (ast.PaneRef("orderbook"),))
TEXTS: dict[str, object] = {
    "PLAN orb": PLAN,
    "PASS": ast.Pass(),
    "STANDDOWN": ast.StandDown("too wide"),
    "VIEW scout": SCOUT,
    "VIEW peek": BAD_VIEW,
}
KNOWN_PANES = {"quote", "bars", "levels"}
FAKE_LANGUAGE_ERRORS: tuple[type[Exception], ...] = (ValueError,)
"""The fake language and catalog raise ValueError as their own errors (the real ones raise
`LangError` and `ViewError`)."""
U = Usage(input=100, output=20, thinking=5, cache_read=40, cache_write=0)


def fake_parse(text: str) -> object:
    if text in TEXTS:
        return TEXTS[text]
    raise ValueError(f"1:1: unexpected {text.split()[0]!r}")


def fake_resolve(view: ast.View) -> object:
    for pane in view.panes:
        if pane.name not in KNOWN_PANES:
            raise ValueError(f"unknown pane {pane.name!r}")
    return view


def fake_briefing(view: object | None, k: Kernel) -> str:
    name = view.name if isinstance(view, ast.View) else "default"
    return f"{k.ordinal} it={k.iteration} left={k.iterations_left} tokens={k.tokens_left} view={name}"


PORTS = LoopPorts(
    interpret=lambda text: interpret_reply(text, parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS),
    resolve_view=fake_resolve,
    briefing=fake_briefing,
    view_errors=FAKE_LANGUAGE_ERRORS,
)


def run(script: list[AgentReply | Raise | str], **kw: object) -> tuple[Done, AuthoringLoop, ScriptedAgent]:
    agent = ScriptedAgent(script, usage=U)
    loop = AuthoringLoop(ordinal="OPEN", ports=PORTS, model="scripted", **kw)  # type: ignore[arg-type]
    done = author_turn(loop, agent)
    agent.assert_finished()
    return done, loop, agent


def ev(iteration: int, kind: EvidenceKind, exhausted: bool = False, usage: Usage = U, **kw: object) -> Evidence:
    return Evidence(
        ordinal="OPEN",
        iteration=iteration,
        kind=kind,
        model="scripted",
        usage=usage,
        budget_exhausted=exhausted,
        **kw,  # type: ignore[arg-type]
    )


def view_ev(iteration: int, exhausted: bool = False) -> Evidence:
    return ev(
        iteration,
        "view-request",
        exhausted,
        panes=("quote", "bars"),
        view="VIEW scout",
        view_budget=600,
        reason="scout",
    )


def test_interpret_reply_kinds() -> None:
    assert interpret_reply("  PLAN orb\n", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS) == TurnReply(Supersede(PLAN))
    assert interpret_reply("PASS", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS) == TurnReply(PassTurn())
    assert interpret_reply("STANDDOWN", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS) == TurnReply(StandDownTurn("too wide"))
    assert interpret_reply("VIEW scout", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS) == RequestView("VIEW scout", "scout", SCOUT)
    assert interpret_reply("hello", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS) == Invalid("1:1: unexpected 'hello'")
    assert isinstance(interpret_reply("   ", parse=fake_parse, errors=FAKE_LANGUAGE_ERRORS), Invalid)


def test_interpret_reply_checks_plans_and_rejects_modules() -> None:
    def check(plan: ast.Plan) -> None:
        raise ValueError("STOP must be below the entry for a BUY")

    assert interpret_reply("PLAN orb", parse=fake_parse, check=check, errors=FAKE_LANGUAGE_ERRORS) == Invalid(
        "STOP must be below the entry for a BUY"
    )
    two = ast.Module((ast.Pass(), ast.Pass()))
    reply = interpret_reply("x", parse=lambda _t: two)
    assert isinstance(reply, Invalid) and "one statement, got 2" in reply.error
    one = ast.Module((ast.Pass(),))
    assert interpret_reply("x", parse=lambda _t: one) == TurnReply(PassTurn())


def test_usage_spend_counts_input_output_thinking_only() -> None:
    assert Usage(input=1000, output=200, thinking=300, cache_read=600, cache_write=100).spend == 1500


def test_terminal_on_first_reply() -> None:
    done, loop, agent = run(["PLAN orb"])
    assert done == Done(turn=Supersede(PLAN), iterations=0, tokens_spent=125)
    assert loop.evidence == []
    assert agent.requests[0] == AuthorRequest(
        ordinal="OPEN", iteration=0, briefing="OPEN it=0 left=3 tokens=8000 view=default"
    )


@pytest.mark.parametrize(
    ("text", "turn"), [("PASS", PassTurn()), ("STANDDOWN", StandDownTurn("too wide"))]
)
def test_pass_and_standdown_are_terminal(text: str, turn: object) -> None:
    done, loop, _ = run([text])
    assert done.turn == turn and loop.evidence == []


def test_valid_view_then_plan() -> None:
    done, loop, agent = run(["VIEW scout", "PLAN orb"])
    assert done == Done(turn=Supersede(PLAN), iterations=1, tokens_spent=250)
    assert loop.evidence == [view_ev(0)]
    second = agent.requests[1]
    assert second == AuthorRequest(
        ordinal="OPEN",
        iteration=1,
        briefing="OPEN it=1 left=2 tokens=7875 view=scout",
        view_name="scout",
    )


def test_invalid_view_is_a_repair_with_the_default_view() -> None:
    done, loop, agent = run(["VIEW scout", "VIEW peek", "PLAN orb"])
    assert done.turn == Supersede(PLAN)
    assert loop.evidence == [
        view_ev(0),
        ev(1, "view-request", view="VIEW peek", reason="peek", error="unknown pane 'orderbook'"),
    ]
    third = agent.requests[2]
    assert third.briefing == "OPEN it=2 left=1 tokens=7750 view=default"
    assert third.view_name is None
    assert third.repair_error == "unknown pane 'orderbook'"


def test_invalid_reply_is_a_repair_keeping_the_last_view() -> None:
    done, loop, agent = run(["VIEW scout", "PLAN orb oops", "PLAN orb"])
    assert done.turn == Supersede(PLAN)
    assert loop.evidence == [view_ev(0), ev(1, "repair", error="1:1: unexpected 'PLAN'", text="PLAN orb oops")]
    third = agent.requests[2]
    assert third.briefing == "OPEN it=2 left=1 tokens=7750 view=scout"
    assert third.view_name == "scout"
    assert third.repair_error == "1:1: unexpected 'PLAN'"


def test_a_valid_view_clears_the_repair_error() -> None:
    _, _, agent = run(["nope", "VIEW scout", "PASS"])
    assert agent.requests[1].repair_error == "1:1: unexpected 'nope'"
    assert agent.requests[2].repair_error is None


def test_exhaustion_by_the_cap_stands_down() -> None:
    done, loop, agent = run(["VIEW scout"] * 4)
    reason = (
        "authoring budget exhausted after a view request: view_request_cap 3 reached "
        "(bounded authoring loop, fail-closed stand-down)"
    )
    assert done == Done(turn=StandDownTurn(reason), iterations=3, tokens_spent=500)
    assert loop.evidence == [view_ev(0), view_ev(1), view_ev(2), view_ev(3, exhausted=True)]
    assert agent.calls == 4


def test_exhaustion_by_the_cap_during_repair() -> None:
    done, loop, _ = run(["x", "x", "x"], settings=LoopSettings(view_request_cap=2))
    assert done.turn == StandDownTurn(
        "authoring budget exhausted after a repair: view_request_cap 2 reached "
        "(bounded authoring loop, fail-closed stand-down)"
    )
    err = "1:1: unexpected 'x'"
    assert loop.evidence == [ev(0, "repair", error=err, text="x"), ev(1, "repair", error=err, text="x"),
                             ev(2, "repair", True, error=err, text="x")]


def test_exhaustion_by_the_token_budget_at_exactly_the_budget() -> None:
    # spend = input (already including cache) + output + thinking = 3000 + 900 + 100 = 4000
    heavy = Usage(input=3000, output=900, thinking=100, cache_read=2500, cache_write=400)
    script: list[AgentReply | Raise | str] = [AgentReply("x", heavy), AgentReply("x", heavy)]
    done, loop, _ = run(script)
    assert done == Done(
        turn=StandDownTurn(
            "authoring budget exhausted after a repair: authoring_token_budget 8000 spent "
            "(8000 tokens) (bounded authoring loop, fail-closed stand-down)"
        ),
        iterations=1,
        tokens_spent=8000,
    )
    err = "1:1: unexpected 'x'"
    assert loop.evidence == [
        ev(0, "repair", usage=heavy, error=err, text="x"),
        ev(1, "repair", True, usage=heavy, error=err, text="x"),
    ]


def test_a_terminal_reply_over_the_budget_still_ends_the_loop() -> None:
    big = Usage(input=9000)
    done, loop, _ = run([AgentReply("PASS", big)])
    assert done.turn == PassTurn() and loop.evidence == []


def test_agent_exception_is_a_fail_closed_stand_down() -> None:
    done, loop, _ = run(["VIEW scout", Raise("connection reset")])
    assert done == Done(
        turn=StandDownTurn("agent failed: RuntimeError: connection reset (fail-closed stand-down)"),
        iterations=1,
        tokens_spent=125,
    )
    assert loop.evidence == [
        view_ev(0),
        ev(1, "agent-error", usage=Usage(), error="RuntimeError: connection reset"),
    ]


def test_agent_timeout_is_a_fail_closed_stand_down() -> None:
    loop = AuthoringLoop(ordinal="OPEN", ports=PORTS, model="m")
    loop.next_request()
    done = loop.receive_failure("timed out after 30s")
    assert done.turn == StandDownTurn("agent failed: timed out after 30s (fail-closed stand-down)")
    with pytest.raises(LoopError):
        loop.next_request()
    with pytest.raises(LoopError):
        loop.receive(AuthorStep(TurnReply(PassTurn())))


def test_single_shot_agent_never_iterates() -> None:
    done, loop, _ = run(["VIEW scout"], iterative=False)
    assert done.turn == StandDownTurn(
        "single-shot agent sent a view request; only PLAN, STANDDOWN or PASS are accepted "
        "(fail-closed stand-down)"
    )
    assert loop.evidence == [ev(0, "single-shot-refusal", True, error="VIEW scout")]
    done, loop, _ = run(["PLAN orb"], iterative=False)
    assert done.turn == Supersede(PLAN) and loop.evidence == []


def test_profile_name_is_recorded_in_evidence_only() -> None:
    _, loop, agent = run(["VIEW scout", "PASS"], profile="balanced")
    assert loop.evidence == [
        Evidence(**{**_fields(view_ev(0)), "profile": "balanced"})  # type: ignore[arg-type]
    ]
    assert "balanced" not in agent.requests[1].briefing


def test_scripted_agent_fails_when_called_more_or_fewer_times() -> None:
    agent = ScriptedAgent(["VIEW scout"])
    loop = AuthoringLoop(ordinal="OPEN", ports=PORTS)
    done = author_turn(loop, agent)  # the second call is past the script
    assert isinstance(done.turn, StandDownTurn) and "only 1 replies were scripted" in done.turn.reason
    with pytest.raises(ScriptError):
        agent.assert_finished()
    with pytest.raises(ScriptError):
        ScriptedAgent(["PASS", "PASS"]).assert_finished()


def _fields(e: Evidence) -> dict[str, object]:
    return {f: getattr(e, f) for f in e.__struct_fields__}


# -- internal bugs surface as errors, never as repair text ------------------------------


def test_a_bug_in_the_parser_propagates_instead_of_becoming_repair_text() -> None:
    def buggy_parse(text: str) -> object:
        raise KeyError("internal")

    with pytest.raises(KeyError, match="internal"):
        interpret_reply("PLAN orb", parse=buggy_parse)


def test_the_real_language_error_is_repair_text() -> None:
    from kestrel import lang

    reply = interpret_reply("PLAN orb\nWHEN last >: BUY 1 MKT", parse=lang.parse)
    assert isinstance(reply, Invalid) and reply.error.startswith("1 error in Kestrel document:")


def test_a_bug_in_view_resolution_propagates_out_of_the_loop() -> None:
    def buggy_resolve(view: ast.View) -> object:
        raise ZeroDivisionError("division by zero in the catalog")

    ports = LoopPorts(
        interpret=PORTS.interpret, resolve_view=buggy_resolve, briefing=fake_briefing,
    )
    loop = AuthoringLoop(ordinal="OPEN", ports=ports)
    loop.next_request()
    with pytest.raises(ZeroDivisionError):
        loop.receive_reply(AgentReply("VIEW scout"))
    agent = ScriptedAgent(["VIEW scout"])
    with pytest.raises(ZeroDivisionError):
        author_turn(AuthoringLoop(ordinal="OPEN", ports=ports), agent)


def test_the_catalog_view_error_is_still_a_repair() -> None:
    from kestrel.frame.view import ViewError

    def strict(view: ast.View) -> object:
        raise ViewError(view.name, ["pane 'orderbook' is not in this catalog"])

    ports = LoopPorts(interpret=PORTS.interpret, resolve_view=strict, briefing=fake_briefing)
    loop = AuthoringLoop(ordinal="OPEN", ports=ports)
    done = author_turn(loop, ScriptedAgent(["VIEW scout", "PASS"]))
    assert done.turn == PassTurn()
    assert [(e.kind, e.error) for e in loop.evidence] == [
        ("view-request", "invalid VIEW scout: 1 problem\n- pane 'orderbook' is not in this catalog")
    ]
