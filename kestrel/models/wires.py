"""The two wire formats: OpenAI Chat Completions and Anthropic Messages, through the official
SDKs (`openai`, `anthropic`: optional extras, imported on first use, never at import time).

Each provider builds its SDK client once, in `connect()` before the session starts (API key,
`base_url` handed over unchanged, the SDK's retries off (`max_retries=0`: the adapter's
`RetryPolicy` is the one retry policy), gives each attempt the timeout the adapter hands it, sends the language card first
(Anthropic: a system block with `cache_control`, so the stable prefix is cached; a model the
capability table marks `system_role = "user"` gets it as the first user message), reads the
reply defensively from the response's plain data (a missing or odd field counts as absent,
never a crash, never a warning on stderr) and turns every SDK error or malformed body into a
one-line `ModelError`: HTTP 401/403/404 a `FatalModelError` (the run cannot go on), 408/409/
429/5xx, timeouts and dropped connections retryable, carrying the response's retry and
rate-limit headers. A server that sends no usage gets an estimate (`estimate_tokens` of the
request and reply text), marked as such, so the token budget still binds. Beside the text:
a separate reasoning field (`reasoning_content` / `reasoning`) is handed over as reasoning,
never as the reply; a refusal (OpenAI's `refusal` or `finish_reason: content_filter`,
Anthropic's `stop_reason: refusal`) as the refusal, with its text.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from kestrel.frame.text import estimate_tokens
from kestrel.models.adapter import Completion, ModelConfig, one_line
from kestrel.models.constrain import constrained_reply, with_constraint
from kestrel.models.conversation import Message
from kestrel.models.effort import EffortDecision, capability
from kestrel.models.errors import (
    FATAL_STATUS,
    RETRYABLE_STATUS,
    FatalModelError,
    ModelError,
    is_retryable_status,
    retry_headers,
)
from kestrel.models.usage import anthropic_usage, openai_usage
from kestrel.session.protocol import Usage
from kestrel.providers import lookup

NOT_SENT = ("ConnectError", "ConnectTimeout")
"""The transport errors raised before a request reached the server (so it cannot be billed)."""

EXTRA_HINT = "install the extra: pip install 'kestrel[{extra}]'"


def _import(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise ModelError(f"the {name} SDK is not installed: {EXTRA_HINT.format(extra=name)}") from None


def _plain(response: object, what: str) -> Mapping[str, Any]:
    """The response as plain data, or a ModelError naming the malformed body."""
    dump = getattr(response, "model_dump", None)
    # warnings=False: a body of the wrong shape is reported by us, not as pydantic's
    # serializer warnings on stderr
    data = dump(warnings=False) if callable(dump) else response
    if not isinstance(data, Mapping):
        raise ModelError(f"{what}: malformed response body (not a JSON object): {one_line(repr(data), 120)}")
    return data


FATAL_HINT = {401: "the API key is refused", 403: "the API key is not allowed this model or endpoint",
              404: "no such model or endpoint"}


def _describe(sdk: Any, exc: Exception, what: str) -> ModelError:
    """The SDK error as a `ModelError`: HTTP 401/403/404 fatal for the run, 408/409/429/5xx,
    timeouts and connection failures retryable (with the response's retry headers)."""
    if isinstance(exc, sdk.APITimeoutError):
        return ModelError(f"{what}: request timed out ({one_line(str(exc), 160)})", retryable=True,
                          maybe_billed=True)
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        text = f"{what}: HTTP {status} from the provider: {one_line(str(exc.message), 200)}"
        if status in FATAL_STATUS:
            return FatalModelError(f"{text} ({FATAL_HINT[status]}: the run cannot go on)", status=status)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return ModelError(text, retryable=is_retryable_status(status), status=status,
                          headers=retry_headers(headers) if headers is not None else None)
    if isinstance(exc, sdk.APIConnectionError):
        sent = type(exc.__cause__).__name__ not in NOT_SENT
        return ModelError(f"{what}: connection failed: {one_line(str(exc), 200)}", retryable=True,
                          maybe_billed=sent)
    return ModelError(f"{what}: {type(exc).__name__}: {one_line(str(exc), 200)}")


def _completion(
    usage: Usage | None, system: str, messages: tuple[Message, ...], text: str, truncated: bool,
    reasoning: str | None = None, refusal: str | None = None,
) -> Completion:
    """The completion; usage that is absent or counts no token at all (a server that sends
    none, or `{}`) is replaced by the token estimate of the request and reply text."""
    if usage is not None and usage.spend > 0:
        return Completion(text=text, usage=usage, truncated=truncated, reasoning=reasoning, refusal=refusal)
    estimate = Usage(input=estimate_tokens(system) + sum(estimate_tokens(m.content) for m in messages),
                     output=estimate_tokens(text) + estimate_tokens(reasoning or ""))
    return Completion(text=text, usage=estimate, truncated=truncated, estimated=True, reasoning=reasoning,
                      refusal=refusal)


REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The message fields OpenAI-compatible servers put a model's reasoning in, beside `content`
(vLLM, SGLang and DeepSeek: `reasoning_content`; Ollama and OpenRouter: `reasoning`)."""


def _text_field(message: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    """The first of `names` holding non-empty text (anything else counts as absent)."""
    for name in names:
        v = message.get(name)
        if isinstance(v, str) and v.strip():
            return v
    return None


_CLIENTS: dict[tuple[str, str, str | None, float, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def plain_messages(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`chat.completions.create` keyword arguments with the message list carried in `extra_body`
    (the SDK merges it into the JSON body in the same place: the bytes sent are those of the
    plain call, `tests/test_models_wires.py`). The messages are plain JSON built here; the SDK's
    typed transform of them walks every message against the union of message types, the most
    CPU a call costs the client (measured by bench/model_calls.py under a profiler)."""
    out = dict(kwargs)
    extra = dict(out.get("extra_body") or {})
    extra["messages"] = out["messages"]
    out["messages"], out["extra_body"] = [], extra
    return out


def close_clients() -> int:
    """Close every SDK client this process built (their connection pools: no socket stays
    open) and forget them; returns how many. Later calls build new ones."""
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        close = getattr(client, "close", None)
        if callable(close):
            close()
    return len(clients)


class _SdkClient:
    """An official SDK's synchronous client, imported and built once (`connect`, before the
    session, so no timed call pays for the import); the SDK's own retries are off. Clients are
    shared within the process per SDK, endpoint, timeout and key (the SDKs' sync clients are
    thread-safe, and building one loads the TLS trust store: about 0.1 s), so the runs of a
    sweep reuse one connection pool per endpoint; `close_clients` closes them."""

    sdk_name = ""
    client_class = ""
    resource = ""  # the client's resource the adapter calls (the SDK imports it on first access)

    def __init__(self, config: ModelConfig, api_key: str) -> None:
        self.config = config
        self._api_key = api_key
        self._client: Any = None

    def _sdk(self) -> Any:
        return _import(self.sdk_name)

    def connect(self) -> None:
        """Import the SDK and build the client, and load the resource the calls use (the SDK
        imports it on first access), before the session: not inside a timed call."""
        target = self.client()
        for name in self.resource.split("."):
            target = getattr(target, name)

    def client(self) -> Any:
        if self._client is None:
            key = (self.sdk_name, self.client_class, self.config.base_url, self.config.call_budget_s,
                   hashlib.sha256(self._api_key.encode()).hexdigest())
            with _CLIENTS_LOCK:
                client = _CLIENTS.get(key)
                if client is None:
                    client = _CLIENTS[key] = getattr(self._sdk(), self.client_class)(
                        api_key=self._api_key,
                        base_url=self.config.base_url,
                        timeout=self.config.call_budget_s,
                        max_retries=0,
                    )
            self._client = client
        return self._client


class OpenAIChat(_SdkClient):
    """Chat Completions (OpenAI and OpenAI-compatible servers: vLLM, llama.cpp, Ollama, ...)."""

    sdk_name = "openai"
    client_class = "OpenAI"
    resource = "chat.completions"

    def __init__(self, config: ModelConfig, api_key: str) -> None:
        super().__init__(config, api_key)
        row = capability(config.provider, config.model)
        self._max_tokens_param = row.max_tokens_param
        self._system_role = row.system_role

    def request(self, system: str, messages: tuple[Message, ...], effort: EffortDecision) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` (also used by the bench), with the
        reply grammar's fields when the config has a constraint (`kestrel.models.constrain`)."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": self._system_role, "content": system}]
            + [{"role": m.role, "content": m.content} for m in messages],
            self._max_tokens_param: self.config.max_output_tokens,
        }
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.seed is not None:  # Chat Completions takes a seed (best-effort determinism)
            body["seed"] = self.config.seed
        body.update(effort.params)
        return with_constraint(body, self.config.constraint)

    def output_limit(self, effort: EffortDecision) -> int:
        """The most output tokens a reply may bill (reasoning included)."""
        return self.config.max_output_tokens

    def complete(
        self, system: str, messages: tuple[Message, ...], effort: EffortDecision, timeout: float
    ) -> Completion:
        sdk = self._sdk()
        what = self.config.describe()
        try:
            response = self.client().chat.completions.create(
                **plain_messages(self.request(system, messages, effort)), timeout=timeout
            )
        except sdk.APIError as exc:
            raise _describe(sdk, exc, what) from None
        except ValueError as exc:  # the SDK's JSON decoding of a body that is not JSON
            raise ModelError(f"{what}: malformed response body (not JSON: {one_line(str(exc), 120)})") from None
        data = _plain(response, what)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ModelError(f"{what}: malformed response body (no choices)")
        choice = choices[0]
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ModelError(f"{what}: malformed response body (message content is not text)")
        content = constrained_reply(self.config.constraint, message, content)
        refusal = _text_field(message, ("refusal",))
        if refusal is None and choice.get("finish_reason") == "content_filter":
            refusal = content or "the provider's content filter stopped the reply"
        usage = data.get("usage")
        return _completion(openai_usage(usage) if isinstance(usage, Mapping) else None, system, messages,
                           content or "", choice.get("finish_reason") == "length",
                           _text_field(message, REASONING_FIELDS), refusal)


class AnthropicMessages(_SdkClient):
    """The Anthropic Messages API."""

    sdk_name = "anthropic"
    client_class = "Anthropic"
    resource = "messages"

    def request(self, system: str, messages: tuple[Message, ...], effort: EffortDecision) -> dict[str, Any]:
        """The keyword arguments of `messages.create` (the card is a cached system block when the
        provider's registry row says its caching is explicit)."""
        block: dict[str, Any] = {"type": "text", "text": system}
        row = lookup(self.config.provider)
        if row is None or row.prompt_caching == "explicit":
            block["cache_control"] = {"type": "ephemeral"}
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_output_tokens + effort.thinking_budget,
            "system": [block],
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if self.config.temperature is not None:  # the Messages API takes no seed
            body["temperature"] = self.config.temperature
        body.update(effort.params)
        return body

    def output_limit(self, effort: EffortDecision) -> int:
        """The most output tokens a reply may bill (`max_tokens`, thinking included)."""
        return self.config.max_output_tokens + effort.thinking_budget

    def complete(
        self, system: str, messages: tuple[Message, ...], effort: EffortDecision, timeout: float
    ) -> Completion:
        sdk = self._sdk()
        what = self.config.describe()
        try:
            response = self.client().messages.create(**self.request(system, messages, effort), timeout=timeout)
        except sdk.APIError as exc:
            raise _describe(sdk, exc, what) from None
        except ValueError as exc:  # the SDK's JSON decoding of a body that is not JSON
            raise ModelError(f"{what}: malformed response body (not JSON: {one_line(str(exc), 120)})") from None
        data = _plain(response, what)
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ModelError(f"{what}: malformed response body (no content blocks)")
        text = "".join(
            b["text"] for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        thinking = "".join(
            b["thinking"] for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "thinking" and isinstance(b.get("thinking"), str)
        )
        usage = data.get("usage")
        refused = data.get("stop_reason") == "refusal"
        return _completion(anthropic_usage(usage) if isinstance(usage, Mapping) else None, system, messages,
                           "" if refused else text, data.get("stop_reason") == "max_tokens",
                           thinking or None,
                           refusal=(text.strip() or "the model declined to answer") if refused else None)


WIRES: dict[str, type[OpenAIChat] | type[AnthropicMessages]] = {
    "openai-chat": OpenAIChat,
    "anthropic-messages": AnthropicMessages,
}
"""The adapter of each wire format of the provider registry (`kestrel.providers.Wire`)."""


__all__ = ["RETRYABLE_STATUS", "WIRES", "AnthropicMessages", "OpenAIChat", "close_clients", "plain_messages"]
