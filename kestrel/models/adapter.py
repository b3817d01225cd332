"""The model agent: a language model behind the agent protocol (blocking, iterative).

A `ModelAgent` keeps one `Conversation` per ordinal, sends the language card as the stable
system prompt, gates the requested effort through the capability table, measures each call's
latency and normalizes usage. The provider call itself is a `WireAdapter` (OpenAI Chat
Completions or Anthropic Messages, each importing its SDK lazily on first use); how the calls
are made (retries, a rate limiter, spending caps, a reply cache) is its `CallPolicy`.

Invariants:
- the provider's SDK client is built (the SDK imported) by `connect()`, before the session
  starts, so a call's latency and timeout measure the call, never an import;
- every call, its retries, the limiter's wait and the backoff between attempts fit in
  `CALL_BUDGET_FRACTION` of the agent timeout (the adapter retries, the SDK's own retries are
  off), so the provider's clear error arrives before the shell's timeout;
- a call goes, in order: the reply cache (a hit: no request, nothing spent, `cached`), the
  spending caps (the call's worst case held, or `SpendingCapReached` and no request), then
  attempts (each after the limiter's slot and, with `slots`, a free call slot of the
  endpoint, held for the request only) retried by the `RetryPolicy`; once the policy's `stop`
  is set no attempt starts (the call fails at once, no request);
- every provider failure (HTTP error, timeout, connection error, a malformed body) raises
  `ModelError` with a one-line reason; the loop turns it into a fail-closed stand-down. A
  `FatalModelError` (HTTP 401/403/404) is never retried, and every later call of the agent
  raises it again at once, without a request;
- a reply cut at the output limit is marked `uncertain` and carries the limit; a provider's
  separate reasoning field and a refusal are handed over beside the text (`AgentReply`);
- with a `reasoner` (reason-first), each reply is two calls, each through the whole call policy
  (cache, caps, limiter, retries) within the one deadline: the reasoner's free call, then the
  constrained call with its reasoning as context; the reply is the second call's text, its
  usage the sum of both (so the token budget, the caps and the cost count both), its latency
  both calls', and the conversation keeps only the statement;
- the API key is held by the SDK client only (never in a repr, a log or the evidence).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Protocol

import msgspec

from kestrel.frame.text import estimate_tokens
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.card import language_card
from kestrel.models.constrain import (
    REASON_FIRST_NOTE,
    Constraint,
    prompt_text,
    reasoning_messages,
    statement_messages,
)
from kestrel.models.conversation import Conversation, Message
from kestrel.models.cost import dollars
from kestrel.models.effort import EffortDecision, gate
from kestrel.models.errors import FatalModelError, ModelError, SpendingCapReached
from kestrel.models.limiter import RateLimited
from kestrel.models.replycache import CachedReply, reply_key
from kestrel.models.retry import server_wait
from kestrel.models.spending import Hold, reserve_all, worst_case_usd
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_OUTPUT_TOKENS = 2048
CALL_BUDGET_FRACTION = 0.9
"""A call's attempts and backoff end within this fraction of the agent timeout."""


class ModelConfig(msgspec.Struct, frozen=True):
    """What a model agent calls. `base_url` None = the SDK's default endpoint; `constraint`:
    the reply grammar its requests carry (`kestrel.models.constrain`), None = none."""

    provider: str
    model: str
    base_url: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    constraint: Constraint | None = None
    temperature: float | None = None  # None: the provider's default (not sent)
    seed: int | None = None  # sent to wires that take one; always part of the reply cache's key

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError(f"{self.provider}: a model name is required ({self.provider}:MODEL)")
        if self.timeout_s <= 0:
            raise ValueError(f"agent timeout must be > 0 seconds, got {self.timeout_s}")
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be from 0 to 2, got {self.temperature}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be a non-negative 64-bit integer, got {self.seed}")

    def describe(self) -> str:
        """`provider model` and, when one is set, the endpoint (for error messages)."""
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.provider} {self.model}{where}"

    @property
    def call_budget_s(self) -> float:
        """The seconds a call's attempts and backoff may take in all (see the invariants)."""
        return CALL_BUDGET_FRACTION * self.timeout_s


class Completion(msgspec.Struct, frozen=True):
    """One provider answer: the reply text, normalized usage, whether it was truncated,
    whether the usage is an estimate (the server sent none), and whether it was played back
    from the reply cache (`cached`: no request was made; the usage is the recorded call's).
    `reasoning` is the provider's separate reasoning field (`reasoning_content`, ...: set
    aside, never parsed) and `refusal` the model's refusal when the provider signals one."""

    text: str
    usage: Usage
    truncated: bool
    estimated: bool = False
    cached: bool = False
    reasoning: str | None = None
    refusal: str | None = None


ESTIMATE_NOTE = (
    "usage estimated: the server sent no usage, so input and output tokens are "
    "estimate_tokens() of the request and reply text"
)


class WireAdapter(Protocol):
    """One wire format. `connect` builds the SDK client (imports the SDK; ModelError when it is
    missing); `request` is the request body `complete` sends (the reply cache's key);
    `output_limit` the most output tokens a reply may bill; `complete` makes one attempt
    within `timeout` seconds and raises `ModelError` on any provider failure."""

    def connect(self) -> None:
        ...

    def request(self, system: str, messages: tuple[Message, ...], effort: EffortDecision) -> dict[str, Any]:
        ...

    def output_limit(self, effort: EffortDecision) -> int:
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

    def __init__(
        self,
        config: ModelConfig,
        provider: WireAdapter,
        *,
        system: str | None = None,
        policy: CallPolicy | None = None,
        reasoner: WireAdapter | None = None,
    ) -> None:
        self.config = config
        self.policy = CallPolicy() if policy is None else policy
        self._provider = provider
        self._reasoner = reasoner
        self._noted_generation = 0
        self._system = language_card() if system is None else system
        self._conversation = Conversation()
        self._last_effort: tuple[int, str | None] | None = None
        self._fatal: FatalModelError | None = None
        for budget in self.policy.budgets:
            budget.check_priceable(config.provider, config.model)

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
        deadline = self.policy.clock.monotonic() + self.config.call_budget_s
        if self._reasoner is None:
            completion = self._call(messages, decision, deadline, self._provider)
        else:
            completion = self._reason_first(messages, decision, deadline, self._reasoner)
            if generation != self._noted_generation:  # once per ordinal
                self._noted_generation = generation
                note = REASON_FIRST_NOTE if note is None else f"{note}; {REASON_FIRST_NOTE}"
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
            cached=completion.cached,
            output_limit=self._provider.output_limit(decision),
            reasoning=completion.reasoning,
            refusal=completion.refusal,
        )

    def _reason_first(
        self, messages: tuple[Message, ...], decision: EffortDecision, deadline: float, reasoner: WireAdapter
    ) -> Completion:
        """The free reasoning call, then the constrained one (see the module invariants)."""
        free = self._call(reasoning_messages(messages), decision, deadline, reasoner)
        final = self._call(statement_messages(messages, free.text), decision, deadline, self._provider)
        a, b = free.usage, final.usage
        usage = Usage(a.input + b.input, a.output + b.output, a.thinking + b.thinking,
                      a.cache_read + b.cache_read, a.cache_write + b.cache_write)
        return Completion(final.text, usage, final.truncated, free.estimated or final.estimated,
                          cached=free.cached and final.cached)

    def _call(
        self, messages: tuple[Message, ...], decision: EffortDecision, deadline: float, wire: WireAdapter
    ) -> Completion:
        """One call through `wire` (see the module invariants for the order of the cache, the
        caps and the attempts)."""
        policy, config = self.policy, self.config
        policy.stats.add(calls=1)
        if self._fatal is not None:
            policy.stats.add(failed=1, fatal=1)
            raise self._fatal
        key: str | None = None
        if policy.cache is not None:
            sent = wire.request(self._system, messages, decision)
            # a seed the wire does not send still tells repeats apart in the cache
            keyed = sent if config.seed is None or "seed" in sent else {**sent, "seed": config.seed}
            key = reply_key(config.provider, config.model, config.base_url, keyed)
            hit = policy.cache.get(key)
            if hit is not None:
                policy.stats.add(cached=1)
                return Completion(hit.text, hit.usage, hit.truncated, hit.estimated, cached=True,
                                  reasoning=hit.reasoning, refusal=hit.refusal)
        worst = 0
        if policy.budgets or policy.limiter is not None:
            tool = prompt_text(config.constraint) if wire is self._provider else ""
            worst = (estimate_tokens(self._system) + estimate_tokens(tool)
                     + sum(estimate_tokens(m.content) for m in messages) + wire.output_limit(decision))
        holds: list[Hold] = []
        if policy.budgets:
            output = wire.output_limit(decision)
            try:
                holds = reserve_all(policy.budgets,
                                    worst_case_usd(config.provider, config.model, worst - output, output), worst)
            except SpendingCapReached:
                policy.stats.add(refused=1)
                raise
        try:
            completion = self._attempts(messages, decision, deadline, worst, wire)
        except ModelError as exc:
            for budget, hold in zip(policy.budgets, holds, strict=True):
                if exc.maybe_billed:
                    budget.settle(hold, None, hold.tokens)  # its cost is unknown: the worst case
                else:
                    budget.release(hold)
            policy.stats.add(failed=1, fatal=int(isinstance(exc, FatalModelError)))
            if isinstance(exc, FatalModelError):
                self._fatal = exc
            raise
        if holds:
            usd = dollars(config.provider, config.model, completion.usage)
            for budget, hold in zip(policy.budgets, holds, strict=True):
                budget.settle(hold, usd, completion.usage.spend)
        if policy.cache is not None and key is not None:
            policy.cache.put(key, config.provider, config.model,
                             CachedReply(completion.text, completion.usage, completion.truncated, completion.estimated,
                                         completion.refusal, completion.reasoning))
        return completion

    def _attempts(
        self, messages: tuple[Message, ...], decision: EffortDecision, deadline: float, booked: int,
        wire: WireAdapter,
    ) -> Completion:
        """Up to `retry.max_attempts` attempts, each allowed all the time left before
        `deadline` (a slow model is not cut to a fraction of the budget), each after the
        limiter's slot when there is a limiter; a retry only after a retryable error and only
        when its pause (the server's wait, else the jittered backoff) still leaves
        `retry.min_attempt_s` before `deadline`."""
        policy = self.policy
        retry, clock, limiter = policy.retry, policy.clock, policy.limiter
        made = 0
        last: ModelError | None = None
        while True:
            permit = None
            if limiter is not None:
                try:
                    permit = limiter.reserve(booked, deadline - retry.min_attempt_s)
                except RateLimited as refused:
                    if last is None:
                        raise
                    # a retry with no slot before the deadline: the call failed with its last error
                    last.args = (f"{last} (after {made} attempt{'s' * (made > 1)}; {refused})",)
                    raise last from None
                wait = permit.start - clock.monotonic()
                if wait > 0:
                    policy.stats.add(limiter_wait_s=wait)
                    clock.sleep(wait)
            if policy.stop is not None and policy.stop.is_set():
                if permit is not None and limiter is not None:
                    limiter.settle(permit, 0)
                raise ModelError(f"{self.config.describe()}: no new call: the run is stopping (cancelled)")
            slots = policy.slots
            if slots is not None and not slots.acquire(deadline - retry.min_attempt_s - clock.monotonic()):
                if permit is not None and limiter is not None:
                    limiter.settle(permit, 0)
                raise ModelError(f"{self.config.describe()}: no free call slot (at most {slots.limit} calls in "
                                 "flight to the endpoint) before the call's deadline", retryable=False)
            left = max(deadline - clock.monotonic(), retry.min_attempt_s)
            made += 1
            policy.stats.add(attempts=1, retries=int(made > 1))
            try:
                completion = wire.complete(self._system, messages, decision, left)
            except ModelError as exc:
                if slots is not None:
                    slots.release()
                if permit is not None and limiter is not None:
                    limiter.settle(permit, booked if exc.maybe_billed else 0)
                if isinstance(exc, FatalModelError):
                    raise
                asked = server_wait(exc.headers, clock.wall()) if exc.headers else None
                if exc.status == 429:
                    policy.stats.add(rate_limited=1)
                    if asked is not None and limiter is not None:
                        limiter.hold(asked)
                pause = retry.next_pause(made, exc, asked, deadline - clock.monotonic(), policy.rng)
                if pause is None:
                    if made > 1:
                        exc.args = (f"{exc} (after {made} attempts)",)
                    raise
                policy.stats.add(backoff_s=pause)
                clock.sleep(pause)
                last = exc
                continue
            except BaseException:
                if slots is not None:
                    slots.release()
                raise
            if slots is not None:
                slots.release()
            if permit is not None and limiter is not None:
                limiter.settle(permit, completion.usage.spend)
            return completion


__all__ = [
    "CALL_BUDGET_FRACTION",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "ESTIMATE_NOTE",
    "DEFAULT_TIMEOUT_S",
    "CallPolicy",
    "Completion",
    "FatalModelError",
    "ModelAgent",
    "ModelConfig",
    "ModelError",
    "SpendingCapReached",
    "WireAdapter",
    "one_line",
]
