"""The agent's side of the contract, against scripted providers on the loopback server replying
as real models do: fenced, thinking, with prose, truncated, refusing, restating. Every reply
goes through the real SDKs, the real adapter, the authoring loop and the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kestrel.data import load_sample
from kestrel.engine.ledger import Armed, Filled
from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.wires import AnthropicMessages, OpenAIChat
from kestrel.session import Evidence, SessionOptions, run_session
from kestrel.session.protocol import StandDownTurn, Supersede
from kestrel.session.results import SessionResult
from model_server import Canned, ModelServer, by_iteration, serve, user_turns

pytest.importorskip("openai")
pytest.importorskip("anthropic")

PLAN = "PLAN orb UNTIL 15:45 RISK maxpos 200 maxloss 400\nWHEN last > high(30m): BUY 100 MKT STOP -0.6% TARGET +1.2%"
PROVIDERS = ("openai", "anthropic")
THOUGHT = "<think>\nThe range is tight; a breakout buy with a 0.6% stop.\n</think>"


def agent(provider: str, srv: ModelServer) -> ModelAgent:
    if provider == "openai":
        config = ModelConfig("openai", "qwen3-8b", base_url=srv.openai_url, timeout_s=30)
        return ModelAgent(config, OpenAIChat(config, "k"))
    config = ModelConfig("anthropic", "claude-haiku-4-5", base_url=srv.anthropic_url, timeout_s=30)
    return ModelAgent(config, AnthropicMessages(config, "k"))


def simulate(provider: str, srv: ModelServer, checkpoints: tuple[str, ...] = ()) -> tuple[SessionResult, list[Evidence]]:
    sink: list[Evidence] = []
    result = run_session(load_sample(), agent(provider, srv), SessionOptions(checkpoints=checkpoints), sink=sink.append)
    return result, sink


def kinds(sink: Sequence[Evidence]) -> list[str]:
    return [e.kind for e in sink]


def second_user_message(srv: ModelServer) -> str:
    turns = user_turns(srv.bodies()[1])
    return turns[-1]


# -- replies as models write them: read at once, recorded -----------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("reply", "change"), [
    (f"```kestrel\n{PLAN}\n```", "markdown fence ```kestrel stripped"),
    (f"{THOUGHT}\n\n{PLAN}", f"<think> block stripped ({len(THOUGHT)} chars)"),
    (f"Here is my plan for today:\n\n{PLAN}\n\nIt buys a breakout above the 30-minute high.",
     "prose around the statement stripped (1 line before and 1 line after)"),
    (f"I'll trade the breakout.\n```\n{PLAN}\n```\nGood luck!",
     "markdown fence ``` stripped; prose outside it stripped"),
])
def test_a_wrapped_reply_is_read_in_one_call_and_the_change_recorded(provider: str, reply: str, change: str) -> None:
    with serve(lambda path, body: Canned(reply)) as srv:
        result, sink = simulate(provider, srv)
    outcome = result.days[0].outcomes[0]
    assert isinstance(outcome.turn, Supersede) and outcome.armed == "armed orb"
    assert srv.count() == 1  # no repair spent on the wrapper
    notes = [e for e in sink if e.kind == "normalized"]
    assert len(notes) == 1 and notes[0].reason is not None and notes[0].reason.startswith(change)
    assert kinds(sink) == ["normalized", "reply"]


def test_a_reply_as_the_card_asks_is_used_as_written_with_nothing_recorded() -> None:
    with serve(lambda path, body: Canned(PLAN)) as srv:
        result, sink = simulate("openai", srv)
    assert result.days[0].outcomes[0].armed == "armed orb" and kinds(sink) == ["reply"]


def test_a_separate_reasoning_field_is_set_aside_never_parsed() -> None:
    # vLLM / DeepSeek send the reasoning in `reasoning_content`, beside the reply's content; the
    # reasoning mentions a plan of its own, which must never be read as the reply
    thought = "Maybe PLAN big\nWHEN last > 1: BUY 900 MKT\nbut that is too large."
    with serve(lambda path, body: Canned(PLAN, reasoning=thought)) as srv:
        result, sink = simulate("openai", srv)
    turn = result.days[0].outcomes[0].turn
    assert isinstance(turn, Supersede) and turn.plan.name == "orb"
    assert [e.reason for e in sink if e.kind == "normalized"] == [
        f"the provider's separate reasoning field set aside ({len(thought)} chars)"]


def test_an_anthropic_thinking_block_is_set_aside_too() -> None:
    with serve(lambda path, body: Canned(PLAN, thinking="weighing the breakout")) as srv:
        result, sink = simulate("anthropic", srv)
    assert result.days[0].outcomes[0].armed == "armed orb"
    assert [e.reason for e in sink if e.kind == "normalized"] == [
        "the provider's separate reasoning field set aside (21 chars)"]


# -- anything ambiguous is a repair that names what to send -----------------------------------


@pytest.mark.parametrize(("first", "hint"), [
    ("VIEW scout: quote, levels\nPASS",
     "your reply holds 2 statements (VIEW on line 1, PASS on line 2): send exactly one statement"),
    ("PLAN orb\nWHEN last > high(30m): BUY 100 MKT STOP -0.6%\nThis rule buys the breakout.\n"
     "WHEN last < low(30m): SELL 100 MKT STOP +0.6%",
     "your reply has prose inside the PLAN (line 3, before line 4): send the PLAN alone"),
    ("```\nPASS\n```\nor perhaps\n```\nSTANDDOWN \"wide\"\n```",
     "your reply holds 2 code blocks that each hold a statement"),
])
def test_an_ambiguous_reply_is_a_repair_whose_hint_names_what_to_send(first: str, hint: str) -> None:
    with serve(by_iteration(first, PLAN)) as srv:
        result, sink = simulate("openai", srv)
    assert result.days[0].outcomes[0].armed == "armed orb"
    assert kinds(sink)[:1] == ["repair"]
    repair = sink[0]
    assert repair.error is not None and repair.error.startswith(hint)
    assert repair.text == first  # the reply as written is kept in the evidence
    assert hint in second_user_message(srv)


def test_a_repair_after_stripped_prose_points_at_the_lines_the_model_wrote() -> None:
    typo = "Sure, here it is:\n\nPLAN orb\nWHEN last > hihg(30m): BUY 100 MKT STOP -0.6%"
    with serve(by_iteration(typo, PLAN)) as srv:
        _, sink = simulate("openai", srv)
    assert kinds(sink)[:2] == ["normalized", "repair"]
    repair = sink[1]
    assert repair.error is not None and "line 4, column 13: unknown function `hihg`" in repair.error  # its own line
    assert "did you mean `high`?" in repair.error


# -- truncated and refusing replies ------------------------------------------------------------


def test_a_truncated_reply_is_repaired_saying_it_was_cut_and_by_how_much() -> None:
    cut = Canned("PLAN orb UNTIL 15:45\nWHEN last > hi", finish="length",
                 usage={"prompt_tokens": 900, "completion_tokens": 2048,
                        "completion_tokens_details": {"reasoning_tokens": 1900}})
    with serve(by_iteration(cut, PLAN)) as srv:
        result, sink = simulate("openai", srv)
    assert result.days[0].outcomes[0].armed == "armed orb"
    repair = next(e for e in sink if e.kind == "repair")
    assert repair.error is not None
    assert repair.error.startswith(
        "your reply was cut at the output limit of 2048 tokens: it used 2048 output tokens (1900 thinking, "
        "148 text) and its text stops at `PLAN orb UNTIL 15:45 WHEN last > hi`. Reply again with one complete, "
        "shorter statement and less reasoning.")
    assert repair.reason == "uncertain: truncated at the output limit"
    assert "cut at the output limit of 2048 tokens" in second_user_message(srv)


def test_a_reply_cut_while_still_thinking_says_so() -> None:
    cut = Canned("<think>\nFirst, the opening range. Then the spread, the volume, the", finish="length")
    with serve(by_iteration(cut, PLAN)) as srv:
        _, sink = simulate("openai", srv)
    repair = next(e for e in sink if e.kind == "repair")
    assert repair.error is not None and "while still thinking: its <think> block never closed" in repair.error
    assert str([e.reason for e in sink if e.kind == "normalized"][0]).endswith("it was never closed")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_stands_down_with_its_text_kept(provider: str) -> None:
    words = "I can't help with placing trades or giving financial advice."
    with serve(lambda path, body: Canned(refusal=words)) as srv:
        result, sink = simulate(provider, srv)
    turn = result.days[0].outcomes[0].turn
    assert turn == StandDownTurn(f"model refused: {words} (fail-closed stand-down)")
    assert srv.count() == 1  # a refusal is not argued with
    refusal = next(e for e in sink if e.kind == "refusal")
    assert refusal.text == words and refusal.usage.spend > 0
    assert "empty reply" not in str([e.error for e in sink])


# -- a restated plan is kept, not re-armed -----------------------------------------------------

ENTRY = "PLAN buyer UNTIL 15:45 RISK maxpos 300\nWHEN time >= 10:00: BUY 100 MKT STOP -2% TARGET +5%"


def _script_by_ordinal(replies: dict[str, str]) -> Any:
    def script(path: str, body: dict[str, Any]) -> Canned:
        first = user_turns(body)[0]
        for label, text in replies.items():
            if f" {label} cutoff " in first.splitlines()[0]:
                return Canned(text)
        return Canned("PASS")

    return script


def _fills(result: SessionResult) -> list[Filled]:
    return [e for e in result.days[0].ledger.events if isinstance(e, Filled)]


def test_restating_the_plan_keeps_it_and_never_pyramids() -> None:
    # the same plan, re-sent at each checkpoint in another layout (the formatter's text is equal)
    again = ENTRY.replace("\n", "\n   ").replace("BUY", "buy")
    replies = {"OPEN": ENTRY, "11:00": again, "13:30": f"```kestrel\n{ENTRY}\n```"}
    with serve(_script_by_ordinal(replies)) as srv:
        result, sink = simulate("openai", srv, ("11:00", "13:30"))
    day = result.days[0]
    assert [o.armed for o in day.outcomes] == ["armed buyer"] + [
        "kept buyer (restated: the same plan, its state kept)"] * 2
    assert sum(isinstance(e, Armed) for e in day.ledger.events) == 1
    assert [f.qty for f in _fills(result) if f.side == "buy"] == [100]  # 100, never 100 -> 200 -> 300
    restated = [e for e in sink if e.kind == "restated"]
    assert [e.ordinal for e in restated] == ["11:00", "13:30"]
    assert restated[0].reason == ("plan buyer restates the incumbent (the same canonical text): kept with its "
                                  "state (spent rules, working orders), not re-armed")


def test_a_plan_changed_on_purpose_re_arms() -> None:
    replies = {"OPEN": ENTRY, "11:00": ENTRY.replace("PLAN buyer", "PLAN buyer2")}
    with serve(_script_by_ordinal(replies)) as srv:
        result, _ = simulate("openai", srv, ("11:00",))
    assert [o.armed for o in result.days[0].outcomes] == ["armed buyer", "armed buyer2"]
    assert [f.qty for f in _fills(result) if f.side == "buy"] == [100, 100]  # the rule fires again


def test_replay_of_a_restated_plan_gives_the_same_ledger() -> None:
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.session.capture import decode_capture

    replies = {"OPEN": ENTRY, "11:00": ENTRY}
    with serve(_script_by_ordinal(replies)) as srv:
        result, _ = simulate("openai", srv, ("11:00",))
    header, turns = decode_capture(result.capture_jsonl(), source="capture")
    again = run_session(load_sample(), RecordedAgent(turns, agent_id=header.agent, header=header),
                        SessionOptions(checkpoints=("11:00",)))
    assert again.ledger_jsonl() == result.ledger_jsonl()
    assert again.days[0].outcomes[1].armed == "kept buyer (restated: the same plan, its state kept)"
