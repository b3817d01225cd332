"""User modes (`--modes PATH`): merged over the built-in modes, validated, case-insensitive,
and what a mode names (provider, model, base URL) reaches the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.frame import DEFAULT_CATALOG
from kestrel.session import profiles
from model_server import by_iteration, serve

PLAN = "PLAN p UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): BUY 100 MKT STOP -0.5%"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "modes.toml"
    p.write_text(text)
    return p


def test_mode_names_provider_model_and_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOOP_KEY", "sk-mode")
    with serve(by_iteration(PLAN)) as srv:
        modes = write(tmp_path, f'[modes.Local_Fast]\nprovider = "openai"\nmodel = "gpt-5-mini"\n'
                                f'base_url = "{srv.openai_url}"\napi_key_env = "LOOP_KEY"\neffort = "high"\n')
        code = main(["simulate", "--modes", str(modes), "--mode", "LOCAL_fast", "--json"])
        out = capsys.readouterr()
        (req,) = srv.requests
    assert code == 0, out.err
    assert req.body["model"] == "gpt-5-mini" and req.body["reasoning_effort"] == "high"
    assert {k.lower(): v for k, v in req.headers.items()}["authorization"] == "Bearer sk-mode"
    assert json.loads(out.out)["agent"] == "openai:gpt-5-mini"


def test_flags_win_over_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    with serve(by_iteration(PLAN)) as srv:
        modes = write(tmp_path, f'[modes.m]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{srv.openai_url}"\n')
        code = main(["simulate", "--modes", str(modes), "--mode", "m", "--model", "gpt-5.1", "--effort", "low"])
        capsys.readouterr()
        (body,) = srv.bodies()
    assert code == 0 and body["model"] == "gpt-5.1" and body["reasoning_effort"] == "low"
    with serve(by_iteration(PLAN)) as srv:
        modes = write(tmp_path, f'[modes.m]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{srv.openai_url}"\n')
        code = main(["simulate", "--modes", str(modes), "--mode", "m", "--agent", "openai:o3"])
        capsys.readouterr()
        (body,) = srv.bodies()
    assert code == 0 and body["model"] == "o3"


def test_user_modes_merge_over_the_builtin_ones() -> None:
    builtin = profiles.load_modes()
    merged = profiles.load_modes(over='[modes.SCOUT]\nview_request_cap = 2\n[modes.mine]\nagent = "baseline"\n')
    assert merged["scout"].panes == builtin["scout"].panes and merged["scout"].agent == "baseline"
    assert merged["scout"].view_request_cap == 2
    assert set(merged) == set(builtin) | {"mine"}
    assert profiles.lookup_mode("  Scout ", merged) is merged["scout"]


def test_builtin_mode_lookup_is_case_insensitive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--mode", "SCOUT", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["agent"] == "baseline"


@pytest.mark.parametrize(
    ("table", "key", "fix"),
    [
        ("view_request_cap = 0", "view_request_cap", ">= 1"),
        ("authoring_token_budget = -5", "authoring_token_budget", ">= 1"),
        ('effort = "turbo"', "effort", "none, minimal, low, medium, high, xhigh, max"),
        ('panes = ["quote", "candles"]', "panes", "'candles'"),
        ('agent = "gpt4"', "agent", "use one of"),
        ('agent = "fixed"', "agent", "fixed:PATH"),
        ('provider = "mistral"', "provider", "use one of anthropic, deepseek, gemini, groq, llamacpp, "
                                             "lmstudio, ollama, openai, openrouter, sglang, together, vllm"),
        ('base_url = "localhost:8000"', "base_url", "http://"),
        ("view_request_cap = \"three\"", "view_request_cap", "Expected `int"),
        ("colour = \"red\"", "colour", "unknown field"),
    ],
)
def test_invalid_user_modes_file_is_one_line_exit_2(
    table: str, key: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    modes = write(tmp_path, f"[modes.Broken]\n{table}\n")
    code = main(["simulate", "--modes", str(modes)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert str(modes) in err and "mode 'broken'" in err and key in err and fix in err


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[modes.a\n", "not valid TOML"),
        ('[modes.A]\nagent = "baseline"\n[modes.a]\nagent = "baseline"\n', "defined twice"),
        ("modes = 3\n", "[modes.NAME] tables"),
    ],
)
def test_malformed_modes_file(text: str, what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--modes", str(write(tmp_path, text))])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and what in err


def test_missing_modes_file_and_unknown_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--modes", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    modes = write(tmp_path, '[modes.mine]\nagent = "baseline"\n')
    assert main(["simulate", "--modes", str(modes), "--mode", "other"]) == 2
    err = capsys.readouterr().err
    assert "unknown mode 'other'" in err and "mine" in err and "scout" in err


def test_builtin_modes_are_valid_and_effort_vocabulary_is_shared() -> None:
    profiles.load_modes(panes=DEFAULT_CATALOG.names())
    for p in (profiles.lookup(n) for n in profiles.names()):
        assert p.effort is None or p.effort in profiles.EFFORT_LEVELS
    from kestrel.service.actors.driver import DEFAULT_AGENT_TIMEOUT_S
    from kestrel.cli import simulate

    assert simulate.EFFORT_LEVELS == profiles.EFFORT_LEVELS
    assert simulate.DEFAULT_AGENT_TIMEOUT_S == DEFAULT_AGENT_TIMEOUT_S


def test_model_flags_on_a_non_model_agent_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--model", "gpt-4o"]) == 0
    assert "calls no model, so --model has no effect" in capsys.readouterr().err
