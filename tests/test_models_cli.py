"""Model agents from the CLI against a loopback model server (both wire formats): the
conversation within an ordinal, budgets, profiles, failures, determinism and replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kestrel.cli import main
from kestrel.models.card import language_card
from model_cli import agent_args, evidence, run, turns
from model_server import Canned, ModelServer, by_iteration, serve

VIEW = "VIEW deep: quote, bars(5m, 12), stats BUDGET 800"
TYPO = "PLAN x\nWHEN last > hihg(30m): BUY 100 MKT STOP -0.5%"
PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback")










def system_text(body: dict[str, Any]) -> str:
    if "system" in body:  # Anthropic: a list of blocks
        return "".join(b["text"] for b in body["system"])
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] != "system"]


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o"), ("anthropic", "claude-haiku-4-5")])
def test_view_repair_plan_conversation(
    provider: str, model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / "ev.jsonl"
    with serve(by_iteration(VIEW, TYPO, PLAN)) as srv:
        code, out, err = run(capsys, "simulate", *agent_args(provider, model, srv), "--checkpoints", "11:00",
                             "--evidence", str(ev), "--json")
        bodies = srv.bodies()
    assert code == 0, err
    assert [t["turn"] for t in turns(out)] == ["PLAN fade", "PLAN fade"]
    assert len(bodies) == 6
    card = language_card()
    for b in bodies:
        assert system_text(b) == card and b["model"] == model
    if provider == "anthropic":
        assert bodies[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    for ordinal, first in (("OPEN", 0), ("11:00", 3)):
        m0, m1, m2 = (chat(bodies[first + k]) for k in range(3))
        assert [m["role"] for m in m0] == ["user"]  # a new ordinal: a new conversation
        assert m0[0]["content"].startswith("CLOCK") and f" {ordinal} " in m0[0]["content"]
        assert m1[:2] == m0 + [{"role": "assistant", "content": VIEW}]
        assert "VIEW deep budget 800" in m1[2]["content"]  # the newly materialized view
        assert "VIEW deep budget 800" not in m0[0]["content"]
        assert m2[:4] == m1 + [{"role": "assistant", "content": TYPO}]
        repair = m2[4]["content"]
        assert "unknown function `hihg`" in repair and "did you mean `high`?" in repair
        assert "BUDGET 1 view requests or repairs left" in repair
    records = evidence(ev)
    calls = [r for r in records if "latency_ms" in r]
    assert [r["kind"] for r in calls] == ["view-request", "repair", "reply"] * 2
    assert all(r["usage"]["input"] > 0 and r["model"] == model for r in calls)
    cost = json.loads(out)["cost"]
    assert cost["total"]["calls"] == 6
    assert cost["total"]["input"] == sum(r["usage"]["input"] for r in calls)
    assert cost["total"]["usd"] is not None and cost["total"]["usd"] > 0
    assert [o["calls"] for o in cost["ordinals"]] == [3, 3]
    assert sum(o["usd"] for o in cost["ordinals"]) == pytest.approx(cost["total"]["usd"])


def test_text_report_has_the_cost_section(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv))
    assert code == 0
    assert "Model calls (openai:gpt-4o)" in out and "Cost of the run: 1 calls" in out and "$" in out


def test_unpriced_model_costs_tokens_not_dollars(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("openai", "my-local-llama", srv), "--json")
    total = json.loads(out)["cost"]["total"]
    assert code == 0 and total["calls"] == 1 and total["input"] > 0 and total["usd"] is None


@pytest.mark.parametrize(
    ("flags", "script", "reason"),
    [
        (["--max-iterations", "1"], (VIEW, VIEW, PLAN), "view_request_cap 1 reached"),
        (["--token-budget", "500"], (VIEW, PLAN), "authoring_token_budget 500 spent"),
    ],
)
def test_budgets_stand_down(
    flags: list[str], script: tuple[str, ...], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(by_iteration(*script)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), *flags, "--json")
    (turn,) = turns(out)
    assert code == 0 and turn["turn"] == "STANDDOWN" and turn["armed"].startswith("stood down")
    assert reason in turn["armed"]


def test_balanced_is_byte_identical_to_unflagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    with serve(by_iteration(VIEW, PLAN)) as srv:
        for extra in ([], ["--profile", "balanced"]):
            cap, led = tmp_path / f"c{len(extra)}", tmp_path / f"l{len(extra)}"
            code, out, _ = run(capsys, "simulate", *agent_args("openai", "gpt-5-mini", srv), *extra,
                               "--capture", str(cap), "--ledger", str(led))
            assert code == 0
            outputs.append((cap.read_bytes(), led.read_bytes()))
        bodies = srv.bodies()
    assert outputs[0] == outputs[1]
    assert all("reasoning_effort" not in b for b in bodies)


def test_fast_profile_effort_and_escalation_restores_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / "ev.jsonl"
    with serve(by_iteration(TYPO, TYPO, PLAN)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("openai", "gpt-5-mini", srv), "--profile", "fast",
                           "--evidence", str(ev), "--json")
        bodies = srv.bodies()
    assert code == 0 and [t["turn"] for t in turns(out)] == ["PLAN fade"]
    assert [b.get("reasoning_effort") for b in bodies] == ["low", "low", None]
    assert "reasoning_effort" not in bodies[2]  # the provider default: the parameter omitted
    (esc,) = [r for r in evidence(ev) if r["kind"] == "escalation"]
    assert "repair streak" in esc["reason"] and "effort default" in esc["reason"]


def test_fast_profile_uncertain_trigger_on_truncated_replies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / "ev.jsonl"
    cut = Canned("PLAN x\nWHEN last >", finish="max_tokens")
    with serve(by_iteration(cut, cut, PLAN)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("anthropic", "claude-haiku-4-5", srv),
                           "--profile", "fast", "--evidence", str(ev), "--json")
        bodies = srv.bodies()
    assert code == 0 and [t["turn"] for t in turns(out)] == ["PLAN fade"]
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024}  # fast: effort low
    assert "thinking" not in bodies[2]
    (esc,) = [r for r in evidence(ev) if r["kind"] == "escalation"]
    assert esc["reason"].startswith("uncertain completion #2")


def test_truncated_terminal_reply_is_marked_uncertain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    with serve(by_iteration(Canned("PASS", finish="length"))) as srv:
        code, _, _ = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), "--evidence", str(ev))
    (reply,) = [r for r in evidence(ev) if r["kind"] == "reply"]
    assert code == 0 and reply["reason"].startswith("uncertain")


def test_thorough_profile_high_effort_and_larger_cap(capsys: pytest.CaptureFixture[str]) -> None:
    small = "VIEW v: quote BUDGET 64"
    script = by_iteration(small, small, small, small, PLAN)
    with serve(script) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("openai", "gpt-5.1", srv), "--profile", "thorough",
                           "--json")
        bodies = srv.bodies()
        code_b, out_b, _ = run(capsys, "simulate", *agent_args("openai", "gpt-5.1", srv), "--json")
    assert code == 0 and code_b == 0
    assert {b["reasoning_effort"] for b in bodies} == {"high"}
    assert [t["turn"] for t in turns(out)] == ["PLAN fade"]  # 4 view requests fit thorough's cap 6
    assert [t["turn"] for t in turns(out_b)] == ["STANDDOWN"]  # but not the default cap 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("canned", "reason"),
    [
        (Canned(status=500), "HTTP 500"),
        (Canned(body=b"<html>bad gateway</html>"), "malformed response body"),
        (Canned(body=b'{"unexpected": true}'), "malformed response body"),
        (Canned(delay=3.0), "timed out"),
    ],
)
def test_provider_failures_stand_down_fail_closed(
    provider: str, canned: Canned, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / "ev.jsonl"
    model = "gpt-4o" if provider == "openai" else "claude-haiku-4-5"
    with serve(lambda path, body: canned) as srv:
        code, out, err = run(capsys, "simulate", *agent_args(provider, model, srv), "--agent-timeout", "1",
                             "--backend", "direct", "--evidence", str(ev), "--json")
        sent = len(srv.requests)
    (turn,) = turns(out)
    # the run's only call failed: the ordinal stands down and the run fails, in one line
    assert code == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("kestrel simulate: the run failed (every call of the run failed): ") and reason in line
    assert json.loads(out)["failure"]["kind"] == "every-call-failed"
    assert turn["turn"] == "STANDDOWN" and reason in turn["armed"] and "fail-closed" in turn["armed"]
    (failure,) = [r for r in evidence(ev) if r["kind"] == "agent-error"]
    assert reason in failure["error"]
    assert 1 <= sent <= 2  # the SDK's retries are bounded (one retry)
    assert json.loads(out)["cost"]["total"]["calls"] == 1


def test_missing_key_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    code, out, err = run(capsys, "simulate", "--agent", "openai:gpt-4o")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "OPENAI_API_KEY" in err
    code, _, err = run(capsys, "simulate", "--agent", "anthropic:claude-haiku-4-5", "--api-key-env", "MY_KEY")
    assert code == 2 and "MY_KEY" in err and len(err.strip().splitlines()) == 1


def test_api_key_env_names_the_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-local-123")
    with serve(by_iteration(PLAN)) as srv:
        code, _, _ = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), "--api-key-env", "LOCAL_KEY")
        (req,) = srv.requests
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert code == 0 and headers["authorization"] == "Bearer sk-local-123"


def test_model_flag_reaches_the_agent(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        code, out, _ = run(capsys, "simulate", "--agent", "openai", "--model", "gpt-4.1-mini",
                           "--base-url", srv.openai_url, "--json")
        (body,) = srv.bodies()
    assert code == 0 and body["model"] == "gpt-4.1-mini"
    assert json.loads(out)["agent"] == "openai:gpt-4.1-mini"
    code, _, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--model", "gpt-5")
    assert code == 2 and "different models" in err
    code, _, err = run(capsys, "simulate", "--agent", "anthropic")
    assert code == 2 and "needs a model" in err


def test_base_url_is_handed_over_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        code, _, _ = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", srv.openai_url + "/")
        assert [r.path for r in srv.requests] == ["/v1/chat/completions"]
    assert code == 0
    code, _, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", "ftp://x")
    assert code == 2 and "--base-url" in err


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_backends_agree_and_replay_calls_no_model(
    provider: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = "gpt-5.1" if provider == "openai" else "claude-opus-4-6"
    got = {}
    with serve(by_iteration(VIEW, TYPO, PLAN)) as srv:
        for backend in ("asyncio", "trio", "direct"):
            cap, led = tmp_path / f"{backend}.cap", tmp_path / f"{backend}.led"
            code, _, err = run(capsys, "simulate", *agent_args(provider, model, srv), "--backend", backend,
                               "--checkpoints", "11:00,13:30", "--effort", "medium",
                               "--capture", str(cap), "--ledger", str(led))
            assert code == 0, err
            got[backend] = (cap.read_bytes(), led.read_bytes())
        assert got["asyncio"] == got["trio"] == got["direct"]
        seen = len(srv.requests)
        assert seen == 3 * 3 * 3
        header = json.loads(got["direct"][0].splitlines()[0])
        assert header["agent"] == f"{provider}:{model}"
        code, _, err = run(capsys, "replay", str(tmp_path / "trio.cap"),
                           "--expect-ledger", str(tmp_path / "asyncio.led"))
        assert code == 0 and "ledger identical" in err
        assert len(srv.requests) == seen  # replay never calls the model


def test_replies_file_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = tmp_path / "r.txt"
    replies.write_text(f"{VIEW}\n---\n{TYPO}\n---\n{PLAN}\n")
    ev = tmp_path / "ev.jsonl"
    code, out, _ = run(capsys, "simulate", "--agent", f"replies:{replies}", "--profile", "fast",
                       "--evidence", str(ev), "--json")
    assert code == 0
    (turn,) = turns(out)
    # fast caps non-terminal iterations at 1: the repair after the view exhausts it
    assert turn["turn"] == "STANDDOWN" and "view_request_cap 1" in turn["armed"]
    code, out, _ = run(capsys, "simulate", "--agent", f"replies:{replies}", "--json")
    (turn,) = turns(out)
    assert code == 0 and turn["turn"] == "PLAN fade" and turn["iterations"] == 2
    from kestrel.frame.text import estimate_tokens

    assert turn["tokens"] == sum(estimate_tokens(t) for t in (VIEW, TYPO, PLAN))
    (tmp_path / "empty.txt").write_text("\n---\n")
    code, _, err = run(capsys, "simulate", "--agent", f"replies:{tmp_path / 'empty.txt'}")
    assert code == 2 and "holds no reply" in err
