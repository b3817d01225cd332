"""The model agent: a language model behind the agent protocol (blocking, iterative).

A `ModelAgent` keeps one `Conversation` per ordinal, sends the language card as the stable
system prompt, gates the requested effort through the capability table, measures each call's
latency and normalizes usage. The provider call itself is a `Provider` (OpenAI Chat
Completions or Anthropic Messages, each importing its SDK lazily on first use).

Invariants:
- the SDK gets the agent timeout (per attempt: timeout / (retries + 1), so the SDK gives up
  before the shell's ask timeout) and a bounded retry count;
- every provider failure (HTTP error, timeout, connection error, a malformed body) raises
  `ModelError` with a one-line reason; the loop turns it into a fail-closed stand-down;
- a reply cut at the output limit is marked `uncertain`;
- the API key is held by the SDK client only (never in a repr, a log or the evidence).
"""

from __future__ import annotations

import time
from typing import ClassVar, Protocol

import msgspec

from kestrel.models.card import language_card
from kestrel.models.conversation import Conversation, Message
from kestrel.models.effort import EffortDecision, gate
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 1
DEFAULT_MAX_OUTPUT_TOKENS = 2048


class ModelError(RuntimeError):
    """A provider call failed (one line: what and why); the ordinal stands down."""


class ModelConfig(msgspec.Struct, frozen=True):
    """What a model agent calls. `base_url` None = the SDK's default endpoint."""

    provider: str
    model: str
    base_url: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError(f"{self.provider}: a model name is required ({self.provider}:MODEL)")
        if self.timeout_s <= 0:
            raise ValueError(f"agent timeout must be > 0 seconds, got {self.timeout_s}")
        if not 0 <= self.max_retries <= 10:
            raise ValueError(f"max retries must be 0 to 10, got {self.max_retries}")

    @property
    def attempt_timeout_s(self) -> float:
        """The SDK's per-attempt timeout: the attempts and their backoff fit in 90% of the
        agent timeout, so the SDK's error (a clear reason) comes before the shell's."""
        return 0.9 * self.timeout_s / (self.max_retries + 1)


class Completion(msgspec.Struct, frozen=True):
    """One provider answer: the reply text, normalized usage, and whether it was truncated."""

    text: str
    usage: Usage
    truncated: bool


class Provider(Protocol):
    """One wire format. `complete` raises `ModelError` on any provider failure."""

    def complete(self, system: str, messages: tuple[Message, ...], effort: EffortDecision) -> Completion:
        ...


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ModelAgent:
    """A model as an iterative, blocking Kestrel agent (see the module invariants)."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True

    def __init__(self, config: ModelConfig, provider: Provider, *, system: str | None = None) -> None:
        self.config = config
        self._provider = provider
        self._system = language_card() if system is None else system
        self._conversation = Conversation()
        self._last_effort: tuple[int, str | None] | None = None

    @property
    def agent_id(self) -> str:
        return f"{self.config.provider}:{self.config.model}"

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def system_prompt(self) -> str:
        return self._system

    def author(self, request: AuthorRequest) -> AgentReply:
        decision = gate(self.config.provider, self.config.model, request.effort)
        generation, messages = self._conversation.ask(request)
        # the note once per ordinal, and again only when the requested level changes
        key = (generation, request.effort)
        note = decision.note if key != self._last_effort else None
        self._last_effort = key
        start = time.perf_counter()
        completion = self._provider.complete(self._system, messages, decision)
        latency_ms = round((time.perf_counter() - start) * 1000.0, 3)
        self._conversation.answer(generation, completion.text)
        return AgentReply(
            completion.text,
            completion.usage,
            latency_ms=latency_ms,
            uncertain=completion.truncated,
            note=note,
        )


__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "Completion",
    "ModelAgent",
    "ModelConfig",
    "ModelError",
    "Provider",
    "one_line",
]
