"""Constrained replies on the wire: every registry provider that takes a grammar gets it in its
documented request field (read back from the recorded request body) and its reply is read
from the documented place; providers that take none get none; a choice that cannot be sent
fails closed; reason-first makes two calls whose usage the run counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_helpers import run_cli
from grammar_tools import Matcher, Recognizer, read_bnf
from model_server import Canned, Recorded, serve
from kestrel.cli import simulate
from kestrel.frame.text import estimate_tokens
from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.errors import SpendingCapReached
from kestrel.models.spending import SpendingBudget, SpendingCap
from kestrel.models.wires import OpenAIChat
from kestrel.session.protocol import AuthorRequest
from kestrel.lang.dialects import export
from kestrel.models import constrain
from kestrel.models.constrain import (
    LLGUIDANCE_HEADER,
    REASON_FIRST,
    REASON_FIRST_NOTE,
    STATEMENT_NOW,
    TOOL_NAME,
    Constraint,
    ConstrainError,
    constrained_reply,
    resolve_constraint,
    with_constraint,
)
from kestrel.providers import FIELD_DIALECTS, Dialect, registry
from kestrel.session import profiles

PLAN = "PLAN t\nWHEN last > 0: BUY 1 MKT STOP -1%"
PROSE = "The spread is tight and the range is narrow; a small breakout plan fits."
GRAMMAR_KEYS = {"tools", "tool_choice", "structured_outputs", "grammar", "ebnf"}


# One row per registry provider whose requests take a grammar: a model that takes it, the
# default dialect, where the grammar is in the request body, and where the reply is read.
CONSTRAINED: dict[str, tuple[str, Dialect, tuple[str | int, ...], str]] = {
    "openai": ("gpt-5-mini", "llguidance", ("tools", 0, "custom", "format", "grammar", "definition"), "tool call"),
    "vllm": ("qwen3-8b", "ebnf", ("structured_outputs", "grammar"), "content"),
    "llamacpp": ("qwen3-8b", "gbnf", ("grammar",), "content"),
    "sglang": ("qwen3-8b", "ebnf", ("ebnf",), "content"),
}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for row in registry():
        if row.key_env:
            monkeypatch.setenv(row.key_env, f"key-for-{row.name}")


def at(body: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = body
    for key in path:
        node = node[key]
    return node


def answer(_path: str, body: dict[str, Any]) -> Canned:
    """PLAN where the request asks for it: in the custom tool call when the request has the tool
    (with prose in the content, which must not be read), else as the message."""
    if "tools" in body:
        return Canned(PROSE, tool_input=PLAN)
    return Canned(PLAN)


def simulate_against(capsys: pytest.CaptureFixture[str], provider: str, model: str, *extra: str,
                     script: Any = answer) -> tuple[int, str, str, list[Recorded]]:
    suffix = "" if provider == "anthropic" else "/v1"
    with serve(script) as srv:
        code, out, err = run_cli(capsys, "simulate", "--agent", f"{provider}:{model}",
                                 "--base-url", f"http://127.0.0.1:{srv.port}{suffix}", "--json", *extra)
        requests = srv.recorded()
    return code, out, err, requests


def turns(out: str) -> list[str]:
    return [t["turn"] for d in json.loads(out)["days"] for t in d["turns"]]


def accepts(grammar: str, dialect: str, text: str) -> bool:
    """Whether the grammar text, as a request carried it, admits `text` in its decoder."""
    if dialect == "llguidance":
        return Matcher(grammar).accepts(text)
    return Recognizer(read_bnf(grammar, dialect)).accepts(text)


def test_every_provider_that_takes_a_grammar_has_a_constrained_wire_test() -> None:
    assert sorted(CONSTRAINED) == sorted(r.name for r in registry() if r.grammar != "none")
    assert {r.name: r.dialect for r in registry() if r.grammar != "none"} == {
        name: row[1] for name, row in CONSTRAINED.items()}


def test_the_choices_agree_everywhere() -> None:
    assert simulate.CONSTRAIN_CHOICES == profiles.CONSTRAIN_CHOICES == constrain.CONSTRAIN_CHOICES
    assert set(FIELD_DIALECTS) >= {r.grammar for r in registry()}


@pytest.mark.parametrize("name", sorted(CONSTRAINED))
def test_the_request_carries_the_grammar_in_the_documented_field(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model, dialect, path, place = CONSTRAINED[name]
    # the reply in the documented place, prose in the other one (which must not be read)
    reply = Canned(PROSE, tool_input=PLAN) if place == "tool call" else Canned(PLAN, tool_input=PROSE)
    code, out, err, requests = simulate_against(capsys, name, model, script=lambda p, b: reply)
    assert code == 0, err
    assert [r.path for r in requests] == ["/v1/chat/completions"]
    body = requests[0].body
    sent = at(body, path)
    assert sent == export(dialect)  # the exported reply grammar, byte for byte
    assert accepts(sent, dialect, PLAN) and not accepts(sent, dialect, "PLAN t WHEN last > 0 BUY")
    assert GRAMMAR_KEYS & set(body) == ({"tools", "tool_choice"} if name == "openai" else {path[0]})
    assert turns(out) == ["PLAN t"]  # the reply, read from where the provider returns it


def test_the_openai_custom_tool_has_the_documented_shape_and_is_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, requests = simulate_against(capsys, "openai", "gpt-5.1")
    assert code == 0, err
    body = requests[0].body
    (tool,) = body["tools"]
    assert tool["type"] == "custom" and tool["custom"]["name"] == TOOL_NAME
    assert tool["custom"]["format"] == {"type": "grammar",
                                        "grammar": {"syntax": "lark", "definition": export("llguidance")}}
    assert body["tool_choice"] == {"type": "custom", "custom": {"name": TOOL_NAME}}
    assert turns(out) == ["PLAN t"]  # from the tool call's input, not the prose in the content


def test_a_custom_tool_reply_without_the_call_is_read_from_the_content(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, requests = simulate_against(capsys, "openai", "gpt-5-mini", script=lambda p, b: Canned(PLAN))
    assert code == 0, err
    assert "tools" in requests[0].body and turns(out) == ["PLAN t"]


@pytest.mark.parametrize(("name", "dialect", "path", "grammar"), [
    ("vllm", "llguidance", ("structured_outputs", "grammar"), export("llguidance")),
    ("llamacpp", "llguidance", ("grammar",), LLGUIDANCE_HEADER + export("llguidance")),
    ("vllm", "ebnf", ("structured_outputs", "grammar"), export("ebnf")),
])
def test_an_explicit_dialect_the_field_takes_is_sent(
    name: str, dialect: Dialect, path: tuple[str, ...], grammar: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err, requests = simulate_against(capsys, name, "m", "--constrain", dialect)
    assert code == 0, err
    sent = at(requests[0].body, path)
    assert sent == grammar and accepts(sent, dialect, PLAN)  # llama.cpp's %llguidance line included
    assert turns(out) == ["PLAN t"]


@pytest.mark.parametrize(("name", "model"), [
    *((r.name, "test-model") for r in registry() if r.grammar == "none"),
    ("openai", "gpt-4o"), ("openai", "gpt-5-chat-latest"),  # models outside the row's grammar_models
])
def test_auto_sends_no_grammar_where_none_is_taken(name: str, model: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, requests = simulate_against(capsys, name, model, script=lambda p, b: Canned(PLAN))
    assert code == 0, err
    assert len(requests) == 1 and not GRAMMAR_KEYS & set(requests[0].body)
    assert turns(out) == ["PLAN t"]


@pytest.mark.parametrize("name", sorted(CONSTRAINED))
def test_off_sends_no_grammar(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err, requests = simulate_against(capsys, name, CONSTRAINED[name][0], "--constrain", "off",
                                              script=lambda p, b: Canned(PLAN))
    assert code == 0, err
    assert not GRAMMAR_KEYS & set(requests[0].body)


@pytest.mark.parametrize(("args", "message"), [
    (("anthropic", "claude-haiku-4-5", "gbnf"), "provider anthropic takes no grammar"),
    (("ollama", "qwen3:8b", "llguidance"), "provider ollama takes no grammar"),
    (("vllm", "m", "gbnf"), "vllm takes its grammar (structured_outputs.grammar) in ebnf or llguidance"),
    (("sglang", "m", "llguidance"), "sglang takes its grammar (ebnf) in ebnf: use --constrain ebnf"),
    (("openai", "gpt-4o", "llguidance"), "model gpt-4o of openai takes no grammar in a custom tool"),
])
def test_a_choice_that_cannot_be_sent_fails_before_anything_runs(
    args: tuple[str, str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, model, dialect = args
    code, _, err, requests = simulate_against(capsys, name, model, "--constrain", dialect)
    assert code == 2 and requests == []
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unknown_choice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run_cli(capsys, "simulate", "--agent", "vllm:m", "--constrain", "regex")
    assert info.value.code == 2
    with pytest.raises(ConstrainError, match="unknown --constrain 'regex'"):
        resolve_constraint("vllm", "m", "regex")


# ---- reason-first


def reasoning_then_plan(_path: str, body: dict[str, Any]) -> Canned:
    return Canned(PLAN) if "grammar" in body else Canned(PROSE)


def test_reason_first_is_a_free_call_then_the_constrained_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / "ev.jsonl"
    code, out, err, requests = simulate_against(capsys, "llamacpp", "qwen3-8b", "--reason-first",
                                                "--evidence", str(ev), script=reasoning_then_plan)
    assert code == 0, err
    assert turns(out) == ["PLAN t"]
    free, constrained = (r.body for r in requests)
    assert "grammar" not in free and constrained["grammar"] == export("gbnf")
    briefing = free["messages"][1]["content"]
    assert briefing.endswith("\n\n" + REASON_FIRST)
    assert [m["role"] for m in constrained["messages"]] == ["system", "user", "assistant", "user"]
    assert constrained["messages"][1:] == [{"role": "user", "content": briefing},
                                           {"role": "assistant", "content": PROSE},
                                           {"role": "user", "content": STATEMENT_NOW}]
    # usage and cost count both calls: the run's tokens are what the server answered for both
    total = json.loads(out)["cost"]["total"]
    assert total["calls"] == 1 and total["tokens"] == sum(r.tokens for r in requests) > 0
    records = [json.loads(line) for line in ev.read_text().splitlines()]
    assert [r["reason"] for r in records if r["kind"] == "model-note"] == [REASON_FIRST_NOTE]


def test_reason_first_repeats_for_every_iteration_and_keeps_only_statements(
    capsys: pytest.CaptureFixture[str]
) -> None:
    def script(_path: str, body: dict[str, Any]) -> Canned:
        if "ebnf" not in body:
            return Canned(PROSE)
        repaired = any(m["content"].startswith("Your reply was not accepted") for m in body["messages"])
        return Canned(PLAN if repaired else "PLAN t\nWHEN last > 0: BUY 1 MKT STOP -1% TARGET -2%")

    code, out, err, requests = simulate_against(capsys, "sglang", "m", "--reason-first", script=script)
    assert code == 0, err
    assert turns(out) == ["PLAN t"]
    assert ["ebnf" in r.body for r in requests] == [False, True, False, True]
    repair = requests[3].body["messages"]
    # the second iteration's conversation holds the first statement, not the first reasoning
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert repair[2]["content"].startswith("PLAN t") and PROSE not in repair[2]["content"]


def test_reason_first_without_a_grammar_makes_one_call_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, requests = simulate_against(capsys, "ollama", "qwen3:8b", "--reason-first",
                                                script=lambda p, b: Canned(PLAN))
    assert code == 0 and len(requests) == 1 and turns(out) == ["PLAN t"]
    assert "reason-first has no effect" in err


# ---- modes and the daemon's submit


def write_modes(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "modes.toml"
    path.write_text(body)
    return path


def test_a_mode_sets_constrain_and_reason_first_and_flags_win(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(reasoning_then_plan) as srv:
        url = f"http://127.0.0.1:{srv.port}/v1"
        modes = write_modes(tmp_path, f'[modes.local]\nprovider = "llamacpp"\nmodel = "q"\nbase_url = "{url}"\n'
                                      'constrain = "llguidance"\nreason_first = true\n')
        code, out, err = run_cli(capsys, "simulate", "--modes", str(modes), "--mode", "local", "--json")
        assert code == 0, err
        free, constrained = srv.recorded()
        assert "grammar" not in free.body and constrained.body["grammar"] == LLGUIDANCE_HEADER + export("llguidance")
        srv.requests.clear()
        code, out, err = run_cli(capsys, "simulate", "--modes", str(modes), "--mode", "local", "--json",
                                 "--constrain", "gbnf", "--no-reason-first")
        assert code == 0, err
        (only,) = srv.recorded()
        assert only.body["grammar"] == export("gbnf")


def test_a_mode_with_an_unknown_constrain_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    modes = write_modes(tmp_path, '[modes.m]\nprovider = "vllm"\nmodel = "q"\nconstrain = "json"\n')
    code, _, err = run_cli(capsys, "simulate", "--modes", str(modes), "--mode", "m")
    assert code == 2 and "mode 'm': constrain 'json' is not a choice" in err


def test_the_daemons_submit_reads_the_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "ctl", "--home", str(tmp_path), "submit", "--agent", "vllm:m",
                           "--constrain", "regex")
    assert code == 2 and "--constrain" in err and "regex" in err
    code, _, err = run_cli(capsys, "ctl", "--home", str(tmp_path), "submit", "--agent", "vllm:m",
                           "--constrain", "ebnf", "--reason-first")
    assert code == 1 and "no daemon is running" in err  # the flags parsed; only the daemon is missing


# ---- the pure path


def test_extra_fields_are_merged_into_an_existing_extra_body() -> None:
    c = Constraint("ebnf", "ebnf", "root ::= \"PASS\"")
    body = with_constraint({"model": "m", "extra_body": {"top_k": 20}}, c)
    assert body == {"model": "m", "extra_body": {"top_k": 20, "ebnf": "root ::= \"PASS\""}}
    assert with_constraint({"model": "m"}, None) == {"model": "m"}


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                           ["tool_calls", "type", "custom", "name", "input", "content", "function"]), inner, max_size=4),
                       max_leaves=12)


@given(JSONISH)
def test_an_odd_message_never_breaks_the_reply_reading(message: object) -> None:
    c = Constraint("custom-tool", "llguidance", "start: \"PASS\"")
    got = constrained_reply(c, message, "content")
    assert got == "content" or (isinstance(message, dict) and isinstance(got, str))


def test_the_tool_call_of_another_tool_is_not_the_reply() -> None:
    c = Constraint("custom-tool", "llguidance", "start: \"PASS\"")
    other = {"tool_calls": [{"type": "custom", "custom": {"name": "other", "input": "PASS"}}]}
    ours = {"tool_calls": [{"type": "function", "function": {"name": TOOL_NAME, "arguments": "{}"}},
                           {"type": "custom", "custom": {"name": TOOL_NAME, "input": "PASS"}}]}
    assert constrained_reply(c, other, None) is None
    assert constrained_reply(c, ours, None) == "PASS"
    assert constrained_reply(Constraint("grammar", "gbnf", "x"), ours, "text") == "text"


# ---- the call policy sees both calls and the tool's prompt


def constrained_agent(url: str, provider: str, model: str, *, reason_first: bool = False,
                      budget: SpendingBudget | None = None) -> tuple[ModelAgent, Constraint]:
    c = resolve_constraint(provider, model)
    assert c is not None
    config = ModelConfig(provider, model, base_url=url, timeout_s=30, max_output_tokens=100, constraint=c)
    policy = CallPolicy(budgets=(budget,) if budget is not None else ())
    reasoner = OpenAIChat(msgspec.structs.replace(config, constraint=None), "k") if reason_first else None
    return ModelAgent(config, OpenAIChat(config, "k"), system="S", policy=policy, reasoner=reasoner), c


REQUEST = AuthorRequest(ordinal="OPEN", iteration=0, briefing="BRIEFING")


def test_the_custom_tools_definition_counts_in_a_calls_worst_case() -> None:
    """The tool's definition is prompt the model reads: a token cap that fits the messages and
    the output limit but not the tool refuses the call before any request."""
    c = resolve_constraint("openai", "gpt-5-mini")
    assert c is not None
    without = estimate_tokens("S") + estimate_tokens("BRIEFING") + 100
    with serve(answer) as srv:
        budget = SpendingBudget(SpendingCap(max_tokens=without + estimate_tokens(export("llguidance")) // 2))
        agent, _ = constrained_agent(srv.openai_url, "openai", "gpt-5-mini", budget=budget)
        with pytest.raises(SpendingCapReached):
            agent.author(REQUEST)
        assert srv.recorded() == []
        vllm, _ = constrained_agent(srv.openai_url, "vllm", "m", budget=SpendingBudget(SpendingCap(max_tokens=without)))
        assert vllm.author(REQUEST).text == PLAN  # a server-side grammar is no prompt: it fits


def test_reason_first_holds_and_settles_each_call_on_the_caps() -> None:
    with serve(reasoning_then_plan) as srv:
        budget = SpendingBudget(SpendingCap(max_tokens=100_000))
        agent, _ = constrained_agent(srv.openai_url, "llamacpp", "m", reason_first=True, budget=budget)
        reply = agent.author(REQUEST)
        requests = srv.recorded()
    assert reply.text == PLAN and len(requests) == 2
    assert budget.spent_tokens == reply.usage.spend == sum(r.tokens for r in requests)
    assert agent.policy.stats.counts().calls == 2
