"""The provider registry is the one table of model providers: every row speaks its wire format
to the loopback server through the real SDK (one test row each), and a bad table is refused
with the row and field named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli_helpers import run_cli
from model_server import Canned, serve
from kestrel.cli.agentspec import agent_of
from kestrel.cli.errors import UsageError
from kestrel.models.adapter import ModelAgent
from kestrel.models.effort import capabilities, capability
from kestrel.providers import BUILTIN_AGENTS, RegistryError, agent_kinds, load_registry, lookup, names, registry
from kestrel.session.profiles import AGENT_KINDS, PROVIDERS

# One row per provider: the request path its wire format posts to, and the URL suffix of the
# loopback server it reaches (the OpenAI SDK appends /chat/completions to a base URL ending in
# /v1, the Anthropic SDK appends /v1/messages to the bare host).
WIRE_TESTS: dict[str, tuple[str, str]] = {
    "openai": ("/v1/chat/completions", "/v1"),
    "anthropic": ("/v1/messages", ""),
    "ollama": ("/v1/chat/completions", "/v1"),
    "vllm": ("/v1/chat/completions", "/v1"),
    "llamacpp": ("/v1/chat/completions", "/v1"),
    "sglang": ("/v1/chat/completions", "/v1"),
    "lmstudio": ("/v1/chat/completions", "/v1"),
    "openrouter": ("/v1/chat/completions", "/v1"),
    "together": ("/v1/chat/completions", "/v1"),
    "groq": ("/v1/chat/completions", "/v1"),
    "deepseek": ("/v1/chat/completions", "/v1"),
    "gemini": ("/v1/chat/completions", "/v1"),
}

PLAN = "PLAN t\nWHEN last > 0: BUY 1 MKT STOP -1%"


def test_every_provider_has_a_wire_test_row() -> None:
    assert sorted(WIRE_TESTS) == sorted(names())


def test_the_modes_and_specs_read_the_registry() -> None:
    assert PROVIDERS == names()
    assert AGENT_KINDS == agent_kinds() == tuple(sorted(BUILTIN_AGENTS + names()))


@pytest.mark.parametrize("name", sorted(WIRE_TESTS))
def test_each_provider_speaks_its_wire_format(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    row = lookup(name)
    assert row is not None
    path, suffix = WIRE_TESTS[name]
    if row.key_env:
        monkeypatch.setenv(row.key_env, f"key-for-{name}")
    with serve(lambda _path, _body: Canned(PLAN)) as srv:
        code, out, err = run_cli(capsys, "simulate", "--agent", f"{name}:test-model",
                                 "--base-url", f"http://127.0.0.1:{srv.port}{suffix}", "--json")
        requests = list(srv.requests)
    assert code == 0, err
    assert [r.path for r in requests] == [path]
    assert requests[0].body["model"] == "test-model"
    headers = {k.lower(): v for k, v in requests[0].headers.items()}
    if row.key_env:  # the SDKs send it as a bearer token or (older Anthropic SDKs) as x-api-key
        assert f"key-for-{name}" in (headers.get("authorization", "").removeprefix("Bearer "),
                                     headers.get("x-api-key"))
    turns = [t["turn"] for d in json.loads(out)["days"] for t in d["turns"]]
    assert turns == ["PLAN t"]


def test_a_provider_without_a_key_needs_no_key_and_has_a_default_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = agent_of("ollama:qwen3:8b")
    assert isinstance(agent, ModelAgent)
    assert agent.config.base_url == "http://127.0.0.1:11434/v1"
    assert agent.agent_id == "ollama:qwen3:8b"


def test_a_provider_with_a_key_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="set the environment variable ANTHROPIC_API_KEY"):
        agent_of("anthropic:claude-haiku-4-5")


def test_effort_follows_the_providers_family() -> None:
    assert capability("openai", "gpt-5.1").param == "reasoning_effort"
    assert capability("ollama", "gpt-5.1").param == "none"  # a local server takes OpenAI's wire, not its effort rows
    assert capability("gemini", "gemini-2.5-flash").levels == ("none", "low", "medium", "high")
    assert capability("gemini", "gemini-2.5-pro").levels == ("low", "medium", "high")  # thinking stays on
    assert capability("gemini", "gemini-2.0-flash").param == "none"
    assert capability("openrouter", "anthropic/claude-sonnet-4.5").param == "reasoning_effort"


def test_every_effort_family_a_row_names_has_rows() -> None:
    families = {c.provider for c in capabilities()}
    assert {r.effort for r in registry()} - {"none"} <= families


def test_the_hosted_rows_are_priced_by_genai_prices() -> None:
    pytest.importorskip("genai_prices")
    from kestrel.models.cost import dollars
    from kestrel.session.protocol import Usage

    models = {"openrouter": "openai/gpt-4o", "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
              "groq": "llama-3.3-70b-versatile", "deepseek": "deepseek-chat", "gemini": "gemini-2.5-flash"}
    for name, model in models.items():
        usd = dollars(name, model, Usage(input=1000, output=1000))
        assert usd is not None and usd > 0, name
    local = [r.name for r in registry() if not r.key_env]
    assert local == ["ollama", "vllm", "llamacpp", "sglang", "lmstudio"]
    assert all(lookup(n).prices == "" and lookup(n).base_url.startswith("http://127.0.0.1:") for n in local)  # type: ignore[union-attr]


def test_the_packaged_rows_validate() -> None:
    rows = registry()
    assert [r.name for r in rows][:2] == ["openai", "anthropic"]
    assert all(r.description for r in rows)


def html_table(**fields: Any) -> str:
    row = {"name": "svc", "wire": "openai-chat", **fields}
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in row.items())
    return f"[[providers]]\n{body}\n"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Bad Name"}, "lower-case identifier"),
        ({"name": "baseline"}, "the name is taken"),
        ({"wire": "grpc"}, "wire"),
        ({"base_url": "ftp://x"}, "http(s) URL"),
        ({"key_env": "NOT A VAR"}, "environment variable name"),
        ({"effort": "huge"}, "effort"),
        ({"surprise": 1}, "surprise"),
        ({"grammar": "grammar", "dialect": "ebnf"}, "takes dialect gbnf or llguidance"),
        ({"grammar": "ebnf"}, "takes dialect ebnf, got None"),
        ({"dialect": "gbnf"}, "dialect is set but grammar is \"none\""),
        ({"wire": "anthropic-messages", "grammar": "custom-tool", "dialect": "llguidance"},
         "not defined for wire 'anthropic-messages'"),
        ({"grammar": "grammar", "dialect": "gbnf", "grammar_models": []}, "grammar_models must list"),
        ({"grammar": "json"}, "grammar"),
    ],
)
def test_a_bad_row_is_refused_with_its_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match="providers.toml") as info:
        load_registry(html_table(**fields))
    assert message in str(info.value)


def test_a_duplicate_name_is_refused() -> None:
    with pytest.raises(RegistryError, match="taken"):
        load_registry(html_table() + html_table())


def test_grammar_models_decide_in_order_and_exclude_with_a_bang() -> None:
    (row,) = load_registry(html_table(grammar="custom-tool", dialect="llguidance",
                                  grammar_models=["!*-chat*", "gpt-5*"]))
    assert row.takes_grammar("gpt-5.1") and row.takes_grammar("GPT-5-mini")
    assert not row.takes_grammar("gpt-5-chat-latest") and not row.takes_grammar("gpt-4o")
    (plain,) = load_registry(html_table())
    assert not plain.takes_grammar("anything")


def test_one_row_adds_an_openai_compatible_service() -> None:
    rows = load_registry(html_table(name="acme", base_url="https://api.acme.test/v1", key_env="ACME_KEY"))
    assert rows[0].sdk == "openai" and rows[0].default_base_url == "https://api.acme.test/v1"
    assert rows[0].needs_key


FIRST_CALL = r"""
import sys
sys.path.insert(0, "tests")
from model_server import Canned, serve
from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.wires import OpenAIChat
from kestrel.session.protocol import AuthorRequest
with serve(lambda p, b: Canned("PASS")) as srv:
    config = ModelConfig("openai", "m", base_url=srv.openai_url, timeout_s=60)
    wire = OpenAIChat(config, "sk")
    wire.connect()
    before = set(sys.modules)
    ModelAgent(config, wire, system="S").author(AuthorRequest(ordinal="OPEN", iteration=0, briefing="B"))
    print(sorted(set(sys.modules) - before))
"""


def test_connect_loads_what_the_first_call_uses() -> None:
    """The SDK imports a client's resources on first access: `connect` loads them, so the first
    call (inside its rate-limiter slot and its latency) imports nothing."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], cwd=root, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout
