"""Helpers shared by the call-policy tests: a virtual clock (the policy's injected clock: its
sleeps are recorded and take no time) and model agents pointed at the loopback model server
(tests/model_server.py) through the real SDKs."""

from __future__ import annotations

import subprocess
import threading

from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.wires import AnthropicMessages, OpenAIChat
from kestrel.session.protocol import AuthorRequest
from model_server import ModelServer

EPOCH = 1_750_000_000.0
"""The virtual clock's UNIX time at its start (2025-06-15T15:06:40Z)."""

PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"
MODELS = {"openai": "gpt-4o", "anthropic": "claude-haiku-4-5"}


class VirtualClock:
    """Monotonic time that moves only when slept on (thread-safe); `sleeps` lists every
    sleep asked for; `wall()` is EPOCH plus the virtual time elapsed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def wall(self) -> float:
        with self._lock:
            return EPOCH + self.now - 1000.0

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += max(seconds, 0.0)


def request(ordinal: str = "OPEN", briefing: str = "CLOCK 09:30\nBUDGET 3 left\nquote") -> AuthorRequest:
    return AuthorRequest(ordinal=ordinal, iteration=0, briefing=briefing)


def agent(
    provider: str,
    srv: ModelServer,
    policy: CallPolicy | None = None,
    *,
    model: str | None = None,
    timeout_s: float = 120.0,
    max_output_tokens: int = 2048,
    system: str | None = None,
) -> ModelAgent:
    """A model agent on the loopback server (its SDK client built, as the CLI does)."""
    url = srv.openai_url if provider == "openai" else srv.anthropic_url
    config = ModelConfig(provider, model or MODELS[provider], base_url=url, timeout_s=timeout_s,
                         max_output_tokens=max_output_tokens)
    wire = OpenAIChat(config, "sk-loopback") if provider == "openai" else AnthropicMessages(config, "sk-loopback")
    wire.connect()
    return ModelAgent(config, wire, system=system, policy=policy)


def start_together(procs: list[subprocess.Popen[str]]) -> None:
    """Wait until every child printed its "ready" line (set up: imports, clients), then let
    them all go at once (a "go" line on their stdin)."""
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", line
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
