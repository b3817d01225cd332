"""The model agent: a language model behind the agent protocol (blocking, iterative).

A `ModelAgent` keeps one `Conversation` per ordinal, sends the language card as the stable
system prompt, gates the requested effort through the capability table, measures each call's
latency and normalizes usage. The provider call itself is a `Provider` (OpenAI Chat
Completions or Anthropic Messages, each importing its SDK lazily on first use).

Invariants:
- the provider's SDK client is built (the SDK imported) by `connect()`, before the session
  starts, so a call's latency and timeout measure the call, never an import;
- every call, its retries and the backoff between them fit in `CALL_BUDGET_FRACTION` of the
  agent timeout (the adapter retries, the SDK's own retries are off), so the provider's clear
  error arrives before the shell's timeout;
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
CALL_BUDGET_FRACTION = 0.9
"""A call's attempts and backoff end within this fraction of the agent timeout."""
RETRY_BACKOFF_S = 0.5
"""The pause before a retry (cut short so the retry still fits the budget)."""
MIN_ATTEMPT_S = 0.05
"""A retry is only made when at least this much of the budget is left for it."""


class ModelError(RuntimeError):
    """A provider call failed (one line: what and why); the ordinal stands down. `retryable`:
    a timeout, a connection failure, HTTP 408/409/429 or 5xx (worth one more attempt)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


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
    def call_budget_s(self) -> float:
        """The seconds a call's attempts and backoff may take in all (see the invariants)."""
        return CALL_BUDGET_FRACTION * self.timeout_s


class Completion(msgspec.Struct, frozen=True):
    """One provider answer: the reply text, normalized usage, whether it was truncated, and
    whether the usage is an estimate (the server sent none)."""

    text: str
    usage: Usage
    truncated: bool
    estimated: bool = False


ESTIMATE_NOTE = (
    "usage estimated: the server sent no usage, so input and output tokens are "
    "estimate_tokens() of the request and reply text"
)


class Provider(Protocol):
    """One wire format. `connect` builds the SDK client (imports the SDK; ModelError when it is
    missing); `complete` makes one attempt within `timeout` seconds and raises `ModelError` on
    any provider failure."""

    def connect(self) -> None:
        ...

    def complete(
        self, system: str, messages: tuple[Message, ...], effort: EffortDecision, timeout: float
    ) -> Completion:
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
        completion = self._call(messages, decision, start + self.config.call_budget_s)
        latency_ms = round((time.perf_counter() - start) * 1000.0, 3)
        self._conversation.answer(generation, completion.text)
        if completion.estimated:
            note = ESTIMATE_NOTE if note is None else f"{note}; {ESTIMATE_NOTE}"
        return AgentReply(
            completion.text,
            completion.usage,
            latency_ms=latency_ms,
            uncertain=completion.truncated,
            note=note,
        )

    def _call(self, messages: tuple[Message, ...], decision: EffortDecision, deadline: float) -> Completion:
        """Up to `max_retries + 1` attempts, each allowed all the time left before `deadline`
        (a slow model is not cut to a fraction of the budget); a retry only after a retryable
        error (HTTP 5xx/429, a dropped connection: these come back fast) and only when it
        still fits, after its backoff, before `deadline`."""
        attempts = self.config.max_retries + 1
        made = 0
        while True:
            left = max(deadline - time.perf_counter(), MIN_ATTEMPT_S)
            try:
                return self._provider.complete(self._system, messages, decision, left)
            except ModelError as exc:
                made += 1
                left = deadline - time.perf_counter()
                pause = min(RETRY_BACKOFF_S, max(left - MIN_ATTEMPT_S, 0.0) / 2)
                if not exc.retryable or made == attempts or left - pause < MIN_ATTEMPT_S:
                    raise
                time.sleep(pause)


__all__ = [
    "CALL_BUDGET_FRACTION",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "ESTIMATE_NOTE",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "Completion",
    "ModelAgent",
    "ModelConfig",
    "ModelError",
    "Provider",
    "one_line",
]
