"""Effort gating through the capability table, per model, and what reaches the wire."""

from __future__ import annotations

import pytest

from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.card import language_card
from kestrel.models.effort import capabilities, gate
from kestrel.models.wires import AnthropicMessages, OpenAIChat
from kestrel.session.profiles import EFFORT_LEVELS
from kestrel.session.protocol import AuthorRequest
from model_server import Canned, serve


@pytest.mark.parametrize(
    ("provider", "model", "level", "params", "noted"),
    [
        ("openai", "gpt-4o", "high", {}, True),                      # no reasoning: omitted
        ("openai", "gpt-4o-mini", "low", {}, True),
        ("openai", "gpt-5.1", "minimal", {"reasoning_effort": "none"}, True),   # gpt-5.1 rejects minimal
        ("openai", "gpt-5.1", "medium", {"reasoning_effort": "medium"}, False),
        ("openai", "gpt-5-mini", "none", {"reasoning_effort": "minimal"}, True),
        ("openai", "gpt-5.2", "xhigh", {"reasoning_effort": "xhigh"}, False),
        ("openai", "o3", "max", {"reasoning_effort": "high"}, True),
        ("openai", "o4-mini", "low", {"reasoning_effort": "low"}, False),
        ("openai", "openai/gpt-5.1", "high", {"reasoning_effort": "high"}, False),  # vendor prefix
        ("openai", "qwen3-8b", "high", {}, True),                    # a local server's model
        ("anthropic", "claude-haiku-4-5", "medium",
         {"thinking": {"type": "enabled", "budget_tokens": 4096}}, False),
        ("anthropic", "claude-sonnet-4-5-20250929", "xhigh",
         {"thinking": {"type": "enabled", "budget_tokens": 16384}}, True),
        ("anthropic", "claude-haiku-4-5", "none", {}, False),
        ("anthropic", "claude-opus-4-6", "high",
         {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}, False),
        ("anthropic", "claude-sonnet-4-6", "minimal",
         {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}, True),
        ("anthropic", "claude-3-5-haiku-20241022", "high", {}, True),
        # chat (non-reasoning) snapshots reject reasoning_effort; gpt-5.2-chat takes only medium
        ("openai", "gpt-5-chat-latest", "high", {}, True),
        ("openai", "gpt-5.1-chat-latest", "low", {}, True),
        ("openai", "gpt-5.2-chat-latest", "high", {"reasoning_effort": "medium"}, True),
        ("openai", "o1-mini", "high", {}, True),                    # o1-mini takes no effort
        ("openai", "o1", "high", {"reasoning_effort": "high"}, False),
        # effort max only on Opus 4.6+: Sonnet 4.6 degrades to high
        ("anthropic", "claude-sonnet-4-6", "max",
         {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}, True),
        ("anthropic", "claude-opus-4-6", "max",
         {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}, False),
    ],
)
def test_gate_per_model(provider: str, model: str, level: str, params: dict[str, object], noted: bool) -> None:
    decision = gate(provider, model, level)
    assert decision.params == params
    assert (decision.note is not None) == noted
    if noted:
        assert decision.note is not None
        assert level in decision.note and model in decision.note


def test_no_effort_is_the_provider_default_and_omits_everything() -> None:
    for provider, model in (("openai", "gpt-5.1"), ("anthropic", "claude-opus-4-6"), ("openai", "gpt-4o")):
        d = gate(provider, model, None)
        assert (d.params, d.note, d.applied) == ({}, None, None)


def test_table_levels_are_the_one_vocabulary() -> None:
    for row in capabilities():
        assert set(row.levels) <= set(EFFORT_LEVELS)
    with pytest.raises(ValueError, match="unknown effort"):
        gate("openai", "gpt-5.1", "turbo")


REQ = AuthorRequest(ordinal="OPEN", iteration=0, briefing="CLOCK\nBUDGET 3 left", effort="high")


@pytest.mark.parametrize(
    ("provider", "model", "expect"),
    [
        ("openai", "gpt-4o", {"max_completion_tokens": 2048}),
        ("openai", "gpt-5.1", {"reasoning_effort": "high", "max_completion_tokens": 2048}),
        ("openai", "llama-3.1-8b", {"max_tokens": 2048}),
        ("anthropic", "claude-haiku-4-5", {"thinking": {"type": "enabled", "budget_tokens": 16384},
                                           "max_tokens": 2048 + 16384}),
        # adaptive thinking counts against max_tokens: raised by the level's headroom
        ("anthropic", "claude-opus-4-6", {"thinking": {"type": "adaptive"},
                                          "output_config": {"effort": "high"}, "max_tokens": 2048 + 16384}),
        ("openai", "gpt-5-chat-latest", {"max_completion_tokens": 2048}),  # a chat model: no effort
        ("anthropic", "claude-3-5-haiku-20241022", {"max_tokens": 2048}),
    ],
)
def test_effort_on_the_wire(provider: str, model: str, expect: dict[str, object]) -> None:
    with serve(lambda path, body: Canned("PASS")) as srv:
        url = srv.openai_url if provider == "openai" else srv.anthropic_url
        config = ModelConfig(provider, model, base_url=url, timeout_s=10)
        wire = OpenAIChat(config, "k") if provider == "openai" else AnthropicMessages(config, "k")
        reply = ModelAgent(config, wire).author(REQ)
        (body,) = srv.bodies()
    knobs = {"reasoning_effort", "thinking", "output_config", "max_tokens", "max_completion_tokens"}
    assert {k: v for k, v in body.items() if k in knobs} == expect
    assert (reply.note is None) == ("high" == gate(provider, model, "high").applied)


@pytest.mark.parametrize(("model", "role"), [("o1-mini", "user"), ("o1-preview", "user"), ("o1", "system"),
                                             ("gpt-4o", "system")])
def test_system_message_role_per_model(model: str, role: str) -> None:
    """o1-mini and o1-preview refuse a system message: the card goes first as a user message."""
    with serve(lambda path, body: Canned("PASS")) as srv:
        config = ModelConfig("openai", model, base_url=srv.openai_url, timeout_s=10)
        wire = OpenAIChat(config, "k")
        wire.connect()
        ModelAgent(config, wire).author(REQ)
        (body,) = srv.bodies()
    first, second = body["messages"][:2]
    assert first["role"] == role and first["content"] == language_card()
    assert second == {"role": "user", "content": REQ.briefing}
    assert all(m["role"] != "system" for m in body["messages"][1:])
