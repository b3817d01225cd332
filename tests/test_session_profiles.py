"""Execution profiles: lookup, precedence, escalation triggers, self-correction, risk classes."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from kestrel.agents.scripted import ScriptedAgent
from kestrel.frame.view import ViewError
from kestrel.lang import ast
from kestrel.session import profiles
from kestrel.session.drive import author_turn
from kestrel.session.loop import AuthoringLoop, Done, Evidence, Kernel, LoopPorts, LoopSettings
from kestrel.session.profiles import (
    FAST,
    THOROUGH,
    Flags,
    Mode,
    Policy,
    ProfileError,
    Resolved,
    Settings,
    load_modes,
    lookup,
    lookup_mode,
    names,
    resolve,
)
from kestrel.session.protocol import AgentReply, PassTurn, StandDownTurn, Supersede, Usage, interpret_reply
from kestrel.market.account import AccountState
from kestrel.session.risk import Finding, RiskAssessment, RiskBounds, RiskLevel, classify, dry_run, worst_case_loss


def _plan(name: str, *orders: ast.Order, risk: ast.Risk = ast.Risk()) -> ast.Plan:
    cond = ast.Compare(">", ast.Series("last"), ast.Number(100.0))
    return ast.Plan(name=name, rules=tuple(ast.Rule(cond, (o,)) for o in orders), risk=risk)


GOOD = _plan("good", ast.Order("buy", 10, "mkt", stop=ast.Offset("abs", -1.0)))
BAD = _plan("bad", ast.Order("buy", 10, "mkt", stop=ast.Offset("abs", 1.0)))
RISKY = _plan("risky", ast.Order("buy", 10, "mkt"))
VIEW = ast.View("scout", (ast.PaneRef("quote"),))
UNKNOWN_VIEW = ast.View("nope", (ast.PaneRef("orderbook"),))
TEXTS: dict[str, object] = {"PLAN good": GOOD, "PLAN bad": BAD, "PLAN risky": RISKY,
                            "VIEW scout": VIEW, "VIEW nope": UNKNOWN_VIEW, "PASS": ast.Pass()}
U = Usage(input=10, output=10)


def _parse(text: str) -> object:
    if text in TEXTS:
        return TEXTS[text]
    raise ValueError(f"cannot parse {text!r}")


def _briefing(view: object | None, k: Kernel) -> str:
    return f"left={k.iterations_left} tokens={k.tokens_left}"


FAKE_LANGUAGE_ERRORS: tuple[type[Exception], ...] = (ValueError,)  # the fakes' own errors
def _resolve(view: ast.View) -> object:
    if view.name == "nope":
        raise ViewError("nope", ["pane 'orderbook' is not in this catalog"])
    return view


ASSESSMENTS = {
    "bad": RiskAssessment(RiskLevel.HIGH, ("places orders",),
                          (Finding(1, "STOP must be below the entry for a BUY", RiskLevel.HIGH),)),
    "risky": RiskAssessment(RiskLevel.CRITICAL, ("no stop",), (Finding(1, "no stop", RiskLevel.CRITICAL),)),
}
PORTS = LoopPorts(
    interpret=lambda t: interpret_reply(t, parse=_parse, errors=FAKE_LANGUAGE_ERRORS),
    resolve_view=_resolve,
    briefing=_briefing,
    assess=lambda p: ASSESSMENTS.get(p.name, RiskAssessment(RiskLevel.HIGH, ("places orders",))),
)


def drive(resolved: Resolved, script: Sequence[AgentReply | str]) -> tuple[Done, AuthoringLoop, ScriptedAgent]:
    s = resolved.settings
    loop = AuthoringLoop(
        ordinal="OPEN",
        ports=PORTS,
        settings=LoopSettings.of(s),
        policy=resolved.policy,
        model="m",
        profile=resolved.profile,
    )
    agent = ScriptedAgent(list(script), usage=U)
    done = author_turn(loop, agent)
    agent.assert_finished()
    return done, loop, agent


def esc(iteration: int, reason: str) -> Evidence:
    return Evidence(ordinal="OPEN", iteration=iteration, kind="escalation", model="m",
                    usage=Usage(), budget_exhausted=False, reason=reason, profile="fast")


RESTORED_ALL = "restored view_request_cap 3, authoring_token_budget 8000, effort default"

# -- lookup ---------------------------------------------------------------------------------


def test_lookup_is_case_insensitive_and_trims() -> None:
    assert lookup("  FaSt \n") is FAST
    assert lookup("thorough") is THOROUGH
    assert lookup("Balanced").name == "balanced"
    with pytest.raises(ProfileError, match="unknown profile 'turbo': choose one of balanced, fast, thorough"):
        lookup(" turbo ")


def test_names_sorted() -> None:
    assert names() == ("balanced", "fast", "thorough")


def test_modes_come_from_the_packaged_config() -> None:
    modes = load_modes()
    assert modes["scout"] == Mode(name="scout", agent="baseline", panes=("quote", "bars", "levels", "stats"))
    assert lookup_mode(" Scout ").name == "scout"
    with pytest.raises(ProfileError, match="unknown mode"):
        lookup_mode("nope")
    with pytest.raises(ProfileError, match="mode 'x'"):
        load_modes("[modes.x]\ncolour = 1\n")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_modes("[modes")


# -- precedence -----------------------------------------------------------------------------


def test_unflagged_defaults() -> None:
    assert resolve(Flags()) == Resolved(Settings(3, 8000, None, False), None, None)


def test_balanced_is_identical_to_no_profile_but_for_the_name() -> None:
    flags = Flags(effort="medium")
    mode = Mode(name="m", model="x", view_request_cap=4)
    plain, bal = resolve(flags, mode), resolve(flags, mode, lookup("balanced"))
    assert bal.settings == plain.settings and bal.policy is None and bal.profile == "balanced"


def test_fast_replaces_the_cap_and_fills_budget_and_effort() -> None:
    r = resolve(Flags(), None, FAST)
    assert r.settings == Settings(1, 4000, "low", False)
    assert r.policy == Policy("fast", 2, 2, True, RiskLevel.CRITICAL, 3, 8000, True)


def test_profile_cap_replaces_a_mode_cap_and_remembers_it() -> None:
    r = resolve(Flags(), Mode(name="m", view_request_cap=5, effort="medium"), FAST)
    assert r.settings.view_request_cap == 1 and r.settings.effort == "medium"
    assert r.policy is not None
    assert (r.policy.restore_cap, r.policy.restore_default_effort) == (5, False)


def test_pinned_cap_is_not_replaced_and_flags_win() -> None:
    r = resolve(Flags(view_request_cap=2, authoring_token_budget=6000, effort="high"), None, FAST)
    assert r.settings == Settings(2, 6000, "high", False)
    assert r.policy == Policy("fast", 2, 2, True, RiskLevel.CRITICAL, None, None, False)


def test_flag_over_mode_over_profile() -> None:
    mode = Mode(name="m", agent="baseline", model="mm", effort="medium", authoring_token_budget=5000)
    r = resolve(Flags(model="flagged"), mode, THOROUGH)
    assert r.settings == Settings(6, 5000, "medium", True, "baseline", "flagged", None)
    assert r.policy is None  # thorough arms no trigger


# -- fast: each trigger escalates exactly once, restoring only displaced values -------------


def test_repair_streak_escalates_once() -> None:
    done, loop, agent = drive(resolve(Flags(), None, FAST), ["x", "x", "PLAN good"])
    assert done.turn == Supersede(GOOD)
    assert [e.kind for e in loop.evidence] == ["repair", "repair", "escalation"]
    assert loop.evidence[2] == esc(1, "repair streak (2 consecutive invalid replies): " + RESTORED_ALL)
    assert [r.effort for r in agent.requests] == ["low", "low", None]
    assert agent.requests[2].briefing == "left=1 tokens=7960"
    assert loop.escalations == 1


def test_repair_streak_escalation_happens_only_once_then_the_cap_binds() -> None:
    done, loop, _ = drive(resolve(Flags(), None, FAST), ["x", "x", "x", "x"])
    assert isinstance(done.turn, StandDownTurn) and "view_request_cap 3 reached" in done.turn.reason
    assert [e.kind for e in loop.evidence] == ["repair", "repair", "escalation", "repair", "repair"]
    assert loop.escalations == 1


def test_without_escalation_fast_would_stand_down_at_its_small_cap() -> None:
    # a view then a repair: no trigger, so fast's cap of 1 binds on the second step
    done, loop, _ = drive(resolve(Flags(), None, FAST), ["VIEW scout", "x"])
    assert isinstance(done.turn, StandDownTurn) and "view_request_cap 1 reached" in done.turn.reason
    assert loop.escalations == 0


def test_second_uncertain_completion_escalates() -> None:
    unsure = AgentReply("VIEW scout", U, uncertain=True)
    done, loop, _ = drive(resolve(Flags(), None, FAST), [unsure, unsure, "PLAN good"])
    assert done.turn == Supersede(GOOD)
    assert [e.kind for e in loop.evidence] == ["view-request", "view-request", "escalation"]
    assert loop.evidence[2] == esc(1, "uncertain completion #2: " + RESTORED_ALL)


def test_self_correction_failure_escalates() -> None:
    done, loop, agent = drive(resolve(Flags(self_correct=True), None, FAST), ["PLAN bad", "PLAN good"])
    assert done.turn == Supersede(GOOD)
    assert [e.kind for e in loop.evidence] == ["self-correction", "escalation"]
    assert loop.evidence[1] == esc(0, "self-correction pass failed: " + RESTORED_ALL)
    assert agent.requests[1].repair_error == (
        "self-correction: the plan is classified HIGH: STOP must be below the entry for a BUY. "
        "Correct the plan, or reply STANDDOWN or PASS."
    )


def test_critical_risk_escalates_and_asks_once_for_review() -> None:
    done, loop, agent = drive(resolve(Flags(), None, FAST), ["PLAN risky", "PLAN risky"])
    assert done.turn == Supersede(RISKY)  # reviewed once; the engine still enforces the bounds
    assert [e.kind for e in loop.evidence] == ["risk-review", "escalation"]
    assert loop.evidence[1] == esc(0, "plan risk CRITICAL: " + RESTORED_ALL)
    assert agent.requests[1].repair_error == (
        "risk review: the plan is classified CRITICAL (no stop). Revise it, or reply STANDDOWN or PASS."
    )


def test_high_risk_plan_does_not_trigger() -> None:
    done, loop, _ = drive(resolve(Flags(), None, FAST), ["PLAN good"])
    assert done.turn == Supersede(GOOD) and loop.evidence == [] and loop.escalations == 0


def test_escalation_restores_only_displaced_values_when_the_cap_is_pinned() -> None:
    done, loop, agent = drive(resolve(Flags(view_request_cap=2), None, FAST), ["x", "x", "PASS"])
    assert loop.evidence[2] == esc(
        1, "repair streak (2 consecutive invalid replies): restored authoring_token_budget 8000, effort default"
    )
    assert agent.requests[2].briefing == "left=0 tokens=7960"  # cap still 2


def test_balanced_and_thorough_never_escalate() -> None:
    # the same CRITICAL plan: balanced arms it (no bound rejects it), thorough's self-check
    # reports the same classification once, neither escalates
    for name, script in (("balanced", ["x", "x", "PLAN risky"]), ("thorough", ["x", "x", "PLAN risky", "PLAN risky"])):
        done, loop, _ = drive(resolve(Flags(), None, lookup(name)), script)
        assert done.turn == Supersede(RISKY) and loop.escalations == 0
        assert "escalation" not in [e.kind for e in loop.evidence]
        reviews = [e for e in loop.evidence if e.kind == "self-correction"]
        assert [e.risk for e in reviews] == (["CRITICAL"] if name == "thorough" else [])


# -- thorough: self-correction ------------------------------------------------------------------


def test_thorough_self_correction_gives_one_correction_re_ask() -> None:
    done, loop, agent = drive(resolve(Flags(), None, THOROUGH), ["PLAN bad", "PLAN bad"])
    assert done.turn == Supersede(BAD)  # one chance only: the second plan is taken as is
    assert [e.kind for e in loop.evidence] == ["self-correction"]
    assert agent.requests[0].effort == "high"


def test_thorough_passes_a_clean_plan_straight_through() -> None:
    done, loop, _ = drive(resolve(Flags(), None, THOROUGH), ["PLAN good"])
    assert done.turn == Supersede(GOOD) and loop.evidence == []


# -- risk classes and dry-run (hand-computed) ----------------------------------------------------


BOUNDS = RiskBounds(maxpos=100, maxloss=50.0)
NO_STOP = "rule 1 (BUY 10): no protective STOP or TRAIL (only maxloss 50 bounds its loss, by flattening)"


def test_classify() -> None:
    assert classify(_plan("p"), reference=100.0, bounds=BOUNDS).level == RiskLevel.LOW
    flat = ast.Plan("f", (ast.Rule(ast.Compare(">", ast.Series("pnl"), ast.Number(1.0)), (ast.Flat(),)),))
    assert classify(flat, reference=100.0, bounds=BOUNDS).level == RiskLevel.HIGH
    ok = _plan("p", ast.Order("buy", 10, "mkt", stop=ast.Offset("pct", -1.0)))  # 10 x 1.00 = 10
    assert classify(ok, reference=100.0, bounds=BOUNDS) == RiskAssessment(RiskLevel.HIGH, ("places orders",))
    trail = _plan("p", ast.Order("sell", 10, "mkt", trail=ast.Offset("abs", 2.0)))
    assert classify(trail, reference=100.0, bounds=BOUNDS).level == RiskLevel.HIGH
    no_stop = _plan("p", ast.Order("buy", 10, "mkt"))
    assert classify(no_stop, reference=100.0, bounds=BOUNDS) == RiskAssessment(
        RiskLevel.CRITICAL, (NO_STOP,), (Finding(1, NO_STOP, RiskLevel.CRITICAL),)
    )
    big = _plan("p", ast.Order("buy", 101, "mkt", stop=ast.Offset("abs", -0.1)))
    assert classify(big, reference=100.0, bounds=BOUNDS).reasons == (
        "rule 1 (BUY 101): size over maxpos 100: the engine rejects it",)
    assert [f.bound for f in classify(big, reference=100.0, bounds=BOUNDS).binding] == ["maxpos"]
    # worst case 60 x |100 - 99| = 60 >= 50
    lossy = _plan("p", ast.Order("buy", 60, "mkt", stop=ast.Offset("at", 99.0)))
    too_much = ("rule 1 (BUY 60): worst-case loss 60.00 reaches maxloss 50: the engine rejects it and disarms "
                "the plan (tighten the stop or trade smaller)")
    assert classify(lossy, reference=100.0, bounds=BOUNDS).reasons == (too_much,)
    # the plan's own RISK clause can only tighten the operator's bounds (as the engine does)
    looser = _plan("p", ast.Order("buy", 60, "mkt", stop=ast.Offset("at", 99.0)), risk=ast.Risk(maxloss=80.0))
    assert classify(looser, reference=100.0, bounds=BOUNDS).reasons == (too_much,)
    small = _plan("p", ast.Order("buy", 45, "mkt", stop=ast.Offset("at", 99.0)))
    assert classify(small, reference=100.0, bounds=BOUNDS).level == RiskLevel.HIGH
    tighter = _plan("p", ast.Order("buy", 45, "mkt", stop=ast.Offset("at", 99.0)), risk=ast.Risk(maxloss=40.0))
    assert classify(tighter, reference=100.0, bounds=BOUNDS).reasons == (
        "rule 1 (BUY 45): worst-case loss 45.00 reaches maxloss 40: the engine rejects it and disarms the plan "
        "(tighten the stop or trade smaller)",
    )


def test_classify_reads_the_position_and_the_session_room() -> None:
    long = AccountState(position=80, avg_entry=100.0, rpnl=-30.0, upnl=-5.0, fees=0.0)
    add = _plan("p", ast.Order("buy", 30, "mkt", stop=ast.Offset("abs", -0.5)))
    a = classify(add, reference=100.0, bounds=BOUNDS, account=long)
    assert a.reasons == ("rule 1 (BUY 30): with the position long 80 it would reach 110, over maxpos 100: "
                         "the engine rejects it",)
    # the session's room is 40 - 35 = 5: a worst case of 30 x 0.5 = 15 reaches it
    session = RiskBounds(maxpos=1000, maxloss=50.0, session_maxloss=40.0)
    b = classify(add, reference=100.0, bounds=session, account=long)
    assert [f.bound for f in b.binding] == ["session_maxloss"]
    assert b.reasons[0].startswith("rule 1 (BUY 30): worst-case loss 15.00 reaches the session's loss room 5.00")
    many = ast.Plan("m", (ast.Rule(ast.Compare(">", ast.Series("last"), ast.Number(1.0)),
                                   (ast.Order("buy", 1, "mkt", stop=ast.Offset("abs", -0.5)),), repeat=60),))
    assert [f.bound for f in classify(many, reference=100.0, bounds=BOUNDS).binding] == ["maxorders"]


def test_dry_run_findings() -> None:
    wrong = _plan("p", ast.Order("sell", 10, "mkt", stop=ast.Offset("pct", -0.5), target=ast.Offset("at", 101.0)))
    assert dry_run(wrong, reference=100.0, bounds=BOUNDS) == (
        "rule 1 (SELL 10): STOP must be above the entry for a SELL",
        "rule 1 (SELL 10): TARGET must be below the entry for a SELL",
    )
    triggered = _plan("p", ast.Order("buy", 10, "mkt", stop=ast.Offset("abs", -1.0)))
    assert dry_run(triggered, reference=100.0, bounds=BOUNDS, probe=lambda c: True) == (
        "rule 1: its condition already holds at the cutoff, so it would fire on the first tick "
        "(wait for a fresh signal instead)",
    )
    assert dry_run(triggered, reference=100.0, bounds=BOUNDS, probe=lambda c: False) == ()
    over = _plan("p", ast.Order("buy", 200, "mkt", stop=ast.Offset("abs", -1.0)))
    assert dry_run(over, reference=100.0, bounds=BOUNDS) == (
        "rule 1 (BUY 200): size over maxpos 100: the engine rejects it",
        "rule 1 (BUY 200): worst-case loss 200.00 reaches maxloss 50: the engine rejects it and disarms the plan "
        "(tighten the stop or trade smaller)",
    )
    # the self-check reports the one classification: no stop is CRITICAL there too
    assert dry_run(_plan("p", ast.Order("buy", 10, "mkt")), reference=100.0, bounds=BOUNDS) == (NO_STOP,)


def test_worst_case_loss_measures_to_the_stop_the_engine_places() -> None:
    # STOP 3.00 below and TRAIL 0.40: the trail's initial level (99.60) is the tighter stop,
    # so 40 x 0.40 = 16 < 50 (the STOP alone would say 40 x 3.00 = 120)
    both = _plan("p", ast.Order("buy", 40, "mkt", stop=ast.Offset("abs", -3.0), trail=ast.Offset("abs", 0.4)))
    assert classify(both, reference=100.0, bounds=BOUNDS).level == RiskLevel.HIGH
    assert dry_run(both, reference=100.0, bounds=BOUNDS) == ()
    # on a 0.25 tick grid a 0.3% stop from 100.00 is placed at 99.75: 100 x 0.25 = 25
    quarter = RiskBounds(maxpos=1000, maxloss=20.0, tick_size=0.25)
    pct = _plan("p", ast.Order("buy", 100, "mkt", stop=ast.Offset("pct", -0.3)))
    assert classify(pct, reference=100.0, bounds=quarter).reasons == (
        "rule 1 (BUY 100): worst-case loss 25.00 reaches maxloss 20: the engine rejects it and disarms the plan "
        "(tighten the stop or trade smaller)",
    )
    # slippage and fees count, as in the engine's worst case: the stop 0.50 below the slipped fill
    # plus the exit's slippage of 0.01, for 10 units, plus 1 fee on each of the two orders: 7.10
    slippy = RiskBounds(maxpos=1000, maxloss=7.1, slippage_ticks=1, fee_per_order=1.0)
    half = _plan("p", ast.Order("buy", 10, "mkt", stop=ast.Offset("abs", -0.5)))
    assert worst_case_loss(half.rules[0].actions[0], 100.0, slippy) == pytest.approx(7.1)  # type: ignore[arg-type]
    assert [f.bound for f in classify(half, reference=100.0, bounds=slippy).binding] == ["maxloss"]


def test_worst_case_loss_counts_the_contract_multiplier() -> None:
    # 1 contract x 0.5 points x 50 per point = 25 < 50; 2 contracts = 50 reaches it (the engine
    # rejects a worst case that would take the pnl to the loss floor itself)
    futures = RiskBounds(maxpos=100, maxloss=50.0, multiplier=50.0)
    one = _plan("p", ast.Order("buy", 1, "mkt", stop=ast.Offset("abs", -0.5)))
    two = _plan("p", ast.Order("buy", 2, "mkt", stop=ast.Offset("abs", -0.5)))
    assert classify(one, reference=4000.0, bounds=futures).level == RiskLevel.HIGH
    assert classify(two, reference=4000.0, bounds=futures).reasons == (
        "rule 1 (BUY 2): worst-case loss 50.00 reaches maxloss 50: the engine rejects it and disarms the plan "
        "(tighten the stop or trade smaller)",
    )


def test_unflagged_loop_allows_three_non_terminal_steps() -> None:
    # the documented defaults as behaviour: three repairs are answered, the fourth stands down
    done, loop, agent = drive(resolve(Flags()), ["x", "x", "x", "x"])
    assert isinstance(done.turn, StandDownTurn)
    assert "after a repair: view_request_cap 3 reached" in done.turn.reason
    assert len(agent.requests) == 4 and loop.escalations == 0


def test_unflagged_loop_spends_at_most_8000_tokens_on_non_terminal_steps() -> None:
    big = AgentReply("x", Usage(input=3000, output=1000))  # 4000 tokens per reply
    done, _, agent = drive(resolve(Flags()), [big, big])
    assert isinstance(done.turn, StandDownTurn)
    assert "authoring_token_budget 8000 spent (8000 tokens)" in done.turn.reason
    assert [r.briefing for r in agent.requests] == ["left=3 tokens=8000", "left=2 tokens=4000"]


# -- the loop as specified --------------------------------------------------------


def test_a_view_that_fails_resolution_counts_toward_the_repair_streak() -> None:
    # fast's cap of 1 would stand down on the second step; a failing VIEW then an invalid
    # reply are two consecutive repairs, so the streak trigger escalates and the plan arrives
    done, loop, agent = drive(resolve(Flags(), None, FAST), ["VIEW nope", "x", "PLAN good"])
    assert done.turn == Supersede(GOOD)
    assert [e.kind for e in loop.evidence] == ["view-request", "repair", "escalation"]
    assert loop.evidence[0].error == "invalid VIEW nope: 1 problem\n- pane 'orderbook' is not in this catalog"
    assert loop.evidence[2] == esc(1, "repair streak (2 consecutive repairs): " + RESTORED_ALL)
    assert len(agent.requests) == 3


def test_a_view_that_resolves_resets_the_repair_streak() -> None:
    done, loop, _ = drive(resolve(Flags(view_request_cap=3), None, FAST), ["x", "VIEW scout", "x", "PASS"])
    assert done.turn == PassTurn()
    assert "escalation" not in [e.kind for e in loop.evidence]


@pytest.mark.parametrize(
    ("flags", "script"),
    [
        (Flags(self_correct=True, authoring_token_budget=20), ["PLAN bad"]),  # tokens spent
        (Flags(self_correct=True, view_request_cap=1), ["VIEW scout", "PLAN bad"]),  # cap reached
    ],
)
def test_no_budget_for_the_self_correction_re_ask_arms_the_plan_as_is(
    flags: Flags, script: list[AgentReply | str]
) -> None:
    done, loop, agent = drive(resolve(flags), script)
    assert done.turn == Supersede(BAD)  # a terminal reply ends the loop whatever it cost
    record = loop.evidence[-1]
    assert record.kind == "self-correction" and record.budget_exhausted
    assert record.error == (
        "self-correction: the plan is classified HIGH: STOP must be below the entry for a BUY. "
        "Correct the plan, or reply STANDDOWN or PASS."
    )
    assert record.reason == "no budget left for the self-correction re-ask: the plan is armed as is"
    assert len(agent.requests) == len(script)


def test_no_budget_for_the_risk_review_arms_the_plan_as_is() -> None:
    # everything pinned: the escalation restores nothing, so no room is left for the review
    flags = Flags(view_request_cap=9, authoring_token_budget=20, effort="medium")
    done, loop, _ = drive(resolve(flags, None, FAST), ["PLAN risky"])
    assert done.turn == Supersede(RISKY)
    assert [e.kind for e in loop.evidence] == ["risk-review", "escalation"]
    assert loop.evidence[0].reason == "no budget left for the risk-review re-ask: the plan is armed as is"


# -- every fast trigger x every pinning: exactly one escalation, only displaced values back ----

UNSURE = AgentReply("VIEW scout", U, uncertain=True)
TRIGGER_SCRIPTS: dict[str, tuple[list[AgentReply | str], str]] = {
    "repair streak": (["x", "x", "x", "x", "PASS"], "repair streak (2 consecutive invalid replies)"),
    "uncertain": ([UNSURE, UNSURE, UNSURE, UNSURE, "PASS"], "uncertain completion #2"),
    "self-correction": (["PLAN bad", "PLAN bad"], "self-correction pass failed"),
    "risk": (["PLAN risky", "PLAN risky"], "plan risk CRITICAL"),
}
PINNINGS: dict[str, tuple[Flags, str]] = {
    "nothing pinned": (Flags(), "view_request_cap 3, authoring_token_budget 8000, effort default"),
    "cap pinned": (Flags(view_request_cap=9), "authoring_token_budget 8000, effort default"),
    "budget pinned": (Flags(authoring_token_budget=9000), "view_request_cap 3, effort default"),
    "effort pinned": (Flags(effort="medium"), "view_request_cap 3, authoring_token_budget 8000"),
    "all pinned": (Flags(view_request_cap=9, authoring_token_budget=9000, effort="medium"), "nothing"),
}


@pytest.mark.parametrize("trigger", sorted(TRIGGER_SCRIPTS))
@pytest.mark.parametrize("pinning", sorted(PINNINGS))
def test_each_fast_trigger_escalates_exactly_once_restoring_only_displaced_values(
    trigger: str, pinning: str
) -> None:
    script, why = TRIGGER_SCRIPTS[trigger]
    flags, restored = PINNINGS[pinning]
    if trigger == "self-correction":
        flags = msgspec.structs.replace(flags, self_correct=True)
    resolved = resolve(flags, None, FAST)
    s = resolved.settings
    loop = AuthoringLoop(
        ordinal="OPEN", ports=PORTS, policy=resolved.policy, model="m", profile="fast",
        settings=LoopSettings.of(s),
    )
    agent = ScriptedAgent(list(script), usage=U)
    author_turn(loop, agent)
    records = [e for e in loop.evidence if e.kind == "escalation"]
    assert loop.escalations == 1 and len(records) == 1
    assert records[0].reason == f"{why}: restored {restored}"
    # after the escalation the agent is asked with the restored effort (or the pinned one)
    efforts = [r.effort for r in agent.requests]
    pinned_effort = flags.effort is not None
    assert efforts[0] == ("medium" if pinned_effort else "low")
    assert efforts[-1] == ("medium" if pinned_effort else None)
    # the budget left in the last briefing reflects the restored (or pinned) token budget
    budget = 9000 if flags.authoring_token_budget else 8000
    spent = 20 * (len(agent.requests) - 1)
    assert agent.requests[-1].briefing.endswith(f"tokens={budget - spent}")
