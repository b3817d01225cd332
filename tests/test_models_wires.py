"""The Chat Completions wire sends the bytes of the SDK's plain call: its message list travels in
`extra_body` (skipping the SDK's typed walk of every message) and lands in the same place of the
same JSON body, with or without a reply grammar's own extra fields. Differential, against the
loopback provider recording the raw bytes of each request."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai")

import openai  # noqa: E402

from model_server import Canned, serve  # noqa: E402
from kestrel.models.adapter import ModelConfig  # noqa: E402
from kestrel.models.constrain import resolve_constraint  # noqa: E402
from kestrel.models.conversation import Message  # noqa: E402
from kestrel.models.effort import gate  # noqa: E402
from kestrel.models.wires import OpenAIChat, plain_messages  # noqa: E402

MESSAGES = (Message("user", "BRIEFING one\n\"quoted\" ünïcode"), Message("assistant", "VIEW v: quote"),
            Message("user", "QUOTE SYM1 bid 104.340 ask 104.345"))


def _answer(_path: str, body: dict[str, Any]) -> Canned:
    return Canned(text="PASS")


@pytest.mark.parametrize(("provider", "model", "constrained"),
                         [("openai", "gpt-4o", False), ("vllm", "m", True), ("llamacpp", "m", True)])
def test_the_wire_sends_the_plain_calls_bytes(provider: str, model: str, constrained: bool) -> None:
    constraint = resolve_constraint(provider, model) if constrained else None
    assert (constraint is not None) == constrained
    with serve(_answer) as srv:
        config = ModelConfig(provider, model, base_url=srv.openai_url, timeout_s=30, max_output_tokens=100,
                             temperature=0.2, seed=7, constraint=constraint)
        wire = OpenAIChat(config, "k")
        effort = gate(provider, model, None)
        assert wire.complete("CARD", MESSAGES, effort, 30).text == "PASS"
        kwargs = wire.request("CARD", MESSAGES, effort)
        assert plain_messages(kwargs)["messages"] == [] and "messages" not in kwargs.get("extra_body", {})
        plain = openai.OpenAI(api_key="k", base_url=srv.openai_url, max_retries=0)
        plain.chat.completions.create(**kwargs, timeout=30)
        plain.close()
        ours, theirs = srv.recorded()
        assert ours.raw == theirs.raw  # byte for byte, key order included
        assert ours.body["messages"][0]["content"] == "CARD"  # the language card first
        assert [m["content"] for m in ours.body["messages"][1:]] == [m.content for m in MESSAGES]
