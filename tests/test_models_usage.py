"""Usage normalization for each provider response shape (input INCLUDES cache reads and writes,
output EXCLUDES thinking, thinking separate), from the plain data and through the real SDKs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.wires import AnthropicMessages, OpenAIChat
from kestrel.models.usage import anthropic_usage, openai_usage
from kestrel.session.protocol import AuthorRequest, Usage
from model_server import Canned, serve

OPENAI_FULL = {
    "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0,
                                  "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
}
OPENAI_COMPAT = {  # vLLM / llama.cpp / Ollama: details objects null or absent
    "prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853,
    "prompt_tokens_details": None, "completion_tokens_details": None,
}
ANTHROPIC_CACHED = {
    "input_tokens": 50, "cache_read_input_tokens": 1400, "cache_creation_input_tokens": 200,
    "output_tokens": 503, "output_tokens_details": {"thinking_tokens": 400},
}
ANTHROPIC_PLAIN = {"input_tokens": 1210, "output_tokens": 37}


@pytest.mark.parametrize(
    ("shape", "normalize", "expected"),
    [
        (OPENAI_FULL, openai_usage, Usage(input=2006, output=108, thinking=192, cache_read=1920)),
        (OPENAI_COMPAT, openai_usage, Usage(input=812, output=41)),
        ({"prompt_tokens": 10, "completion_tokens": 2}, openai_usage, Usage(input=10, output=2)),
        ({"prompt_tokens": 900, "completion_tokens": 5, "prompt_tokens_details":
          {"cached_tokens": 600, "cache_write_tokens": 250}}, openai_usage,
         Usage(input=900, output=5, cache_read=600, cache_write=250)),
        (None, openai_usage, Usage()),
        (ANTHROPIC_CACHED, anthropic_usage,
         Usage(input=1650, output=103, thinking=400, cache_read=1400, cache_write=200)),
        (ANTHROPIC_PLAIN, anthropic_usage, Usage(input=1210, output=37)),
        ({"input_tokens": 5, "output_tokens": 3, "cache_read_input_tokens": None}, anthropic_usage,
         Usage(input=5, output=3)),
        (None, anthropic_usage, Usage()),
    ],
)
def test_usage_shapes(shape: Any, normalize: Any, expected: Usage) -> None:
    assert normalize(shape) == expected


junk = st.one_of(st.none(), st.sampled_from(["", "12", "x"]), st.integers(-5, 10**6), st.floats(),
                 st.fixed_dictionaries({}, optional={"cached_tokens": st.integers(-5, 99),
                                                     "reasoning_tokens": st.integers(-5, 99),
                                                     "thinking_tokens": st.integers(-5, 99)}))


@settings(max_examples=100)
@given(st.dictionaries(st.sampled_from(list(OPENAI_FULL) + list(ANTHROPIC_CACHED)), junk))
def test_odd_usage_never_crashes_and_stays_non_negative(raw: dict[str, Any]) -> None:
    o, a = openai_usage(raw), anthropic_usage(raw)
    for u in (o, a):
        assert min(u.input, u.output, u.thinking, u.cache_read, u.cache_write) >= 0
    assert o.cache_read <= o.input and o.cache_write <= o.input
    assert a.cache_read + a.cache_write <= a.input


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_openai_totals_are_preserved(prompt: int, completion: int, cached: int, reasoning: int) -> None:
    cached, reasoning = min(cached, prompt), min(reasoning, completion)
    u = openai_usage({"prompt_tokens": prompt, "completion_tokens": completion,
                      "prompt_tokens_details": {"cached_tokens": cached},
                      "completion_tokens_details": {"reasoning_tokens": reasoning}})
    assert (u.input, u.output + u.thinking, u.thinking, u.cache_read) == (prompt, completion, reasoning, cached)


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_anthropic_input_sums_the_three_fields(fresh: int, read: int, written: int, out: int) -> None:
    u = anthropic_usage({"input_tokens": fresh, "cache_read_input_tokens": read,
                         "cache_creation_input_tokens": written, "output_tokens": out})
    assert (u.input, u.output, u.cache_read, u.cache_write) == (fresh + read + written, out, read, written)
    assert u.spend == fresh + read + written + out


REQUEST = AuthorRequest(ordinal="OPEN", iteration=0, briefing="CLOCK t\nBUDGET 3 left\nquote")


@pytest.mark.parametrize(
    ("provider", "model", "usage", "expected"),
    [
        ("openai", "gpt-5-mini", OPENAI_FULL, Usage(input=2006, output=108, thinking=192, cache_read=1920)),
        ("openai", "qwen3-8b", OPENAI_COMPAT, Usage(input=812, output=41)),
        ("openai", "llama", {"prompt_tokens": 7, "completion_tokens": 1}, Usage(input=7, output=1)),
        ("anthropic", "claude-haiku-4-5", ANTHROPIC_CACHED,
         Usage(input=1650, output=103, thinking=400, cache_read=1400, cache_write=200)),
        ("anthropic", "claude-3-5-haiku", ANTHROPIC_PLAIN, Usage(input=1210, output=37)),
    ],
)
def test_usage_through_the_sdk(provider: str, model: str, usage: dict[str, Any], expected: Usage) -> None:
    with serve(lambda path, body: Canned("PASS", usage=usage, thinking="hmm" if provider == "anthropic" else None)) as srv:
        url = srv.openai_url if provider == "openai" else srv.anthropic_url
        config = ModelConfig(provider, model, base_url=url, timeout_s=10)
        wire = OpenAIChat(config, "k") if provider == "openai" else AnthropicMessages(config, "k")
        reply = ModelAgent(config, wire).author(REQUEST)
    assert reply.text == "PASS"
    assert reply.usage == expected
