"""Model adapters and modes, defect by defect: each test drives the real
CLI, SDKs or session against the loopback model server (tests/model_server.py)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kestrel.service.actors.driver import simulate
from kestrel.cli import main
from kestrel.data.sample import load_sample
from kestrel.frame import DEFAULT_CATALOG
from kestrel.models.cost import run_cost
from kestrel.session.loop import Evidence, EvidenceKind
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage
from kestrel.session.runner import SessionOptions, SessionResult, run_session
from model_cli import agent_args, evidence, run, turns
from model_server import Canned, ModelServer, by_iteration, serve

ROOT = Path(__file__).resolve().parents[1]
VIEW = "VIEW deep: quote, bars(5m, 12), stats BUDGET 800"
PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback")










# 1. the SDK import and client construction happen before the session, not in the first call


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_first_call_against_a_fast_server_does_not_time_out(provider: str, tmp_path: Path) -> None:
    """A fresh process (no SDK imported yet): a 0.5 s server and a 3 s agent timeout. Importing
    the SDK inside the first timed call (0.7-4 s on this machine, more under load) stood OPEN
    down; the first request's own set-up stays inside the timed call."""
    model = "gpt-4o" if provider == "openai" else "claude-haiku-4-5"
    ev = tmp_path / "ev.jsonl"
    with serve(lambda path, body: Canned(PLAN, delay=0.5)) as srv:
        proc = subprocess.run(
            [sys.executable, "-m", "kestrel", "simulate", *agent_args(provider, model, srv),
             "--agent-timeout", "3", "--checkpoints", "11:00", "--backend", "direct",
             "--evidence", str(ev), "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk", "ANTHROPIC_API_KEY": "sk"},
        )
    assert proc.returncode == 0, proc.stderr
    assert [t["turn"] for t in turns(proc.stdout)] == ["PLAN fade", "PLAN fade"]
    replies = [r for r in evidence(ev) if r["kind"] == "reply"]
    assert len(replies) == 2 and all(500 <= r["latency_ms"] < 3000 for r in replies)


def test_the_sdk_is_imported_when_the_agent_is_built() -> None:
    code = (
        "import sys\n"
        "from kestrel.cli.agentspec import agent_of\n"
        "assert 'anthropic' not in sys.modules\n"
        "agent_of('anthropic:claude-haiku-4-5', base_url='http://127.0.0.1:9')\n"
        "print('anthropic' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ANTHROPIC_API_KEY": "sk"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


# 4. malformed bodies: a fail-closed stand-down, and no pydantic warning on stderr


@pytest.mark.parametrize(
    ("provider", "raw"),
    [
        ("openai", b'{"choices": "x"}'),
        ("openai", b'{"choices": [1]}'),
        ("openai", b'{"choices": [{"message": {"role": "assistant", "content": 123}}]}'),
        ("openai", b'{"choices": [{"message": {"role": "assistant", "content": "PASS"}}], "usage": "lots"}'),
        ("anthropic", b'{"content": "oops"}'),
    ],
)
def test_malformed_bodies_print_no_warning(provider: str, raw: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    model = "gpt-4o" if provider == "openai" else "claude-haiku-4-5"
    gc.collect()  # earlier tests' garbage warns when collected: not inside the window below
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with serve(lambda path, body: Canned(body=raw)) as srv:
            code, out, err = run(capsys, "simulate", *agent_args(provider, model, srv), "--backend", "direct",
                                 "--json")
    assert [str(w.message) for w in caught] == []
    (turn,) = turns(out)
    assert turn["turn"] in ("STANDDOWN", "PASS")
    if json.loads(out)["failure"] is None:  # a body read as an empty reply: no warning at all
        assert code == 0 and err == ""
    else:  # the run's only call failed: the run fails in one line, and nothing else is printed
        (line,) = err.splitlines()
        assert code == 1 and line.startswith("kestrel simulate: the run failed") and "malformed" in line


# 5. a mode's pane restriction reaches the model: the card and the default view


def test_mode_panes_in_the_card_and_the_default_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        modes = tmp_path / "modes.toml"
        modes.write_text(f'[modes.narrow]\nagent = "openai:gpt-4o"\nbase_url = "{srv.openai_url}"\n'
                         'panes = ["quote", "bars", "levels"]\n')
        code, _, err = run(capsys, "simulate", "--modes", str(modes), "--mode", "narrow")
        (body,) = srv.bodies()
    assert code == 0, err
    card, briefing = body["messages"][0]["content"], body["messages"][1]["content"]
    allowed = {"quote", "bars", "levels"}
    pane_section = card.split("# Panes", 1)[1].split("\n\n", 1)[0]
    for spec in DEFAULT_CATALOG:
        assert (f"\n{spec.signature()}:" in pane_section) == (spec.name in allowed), spec.name
    headers = {line.split()[0] for line in briefing.split("VIEW default", 1)[1].splitlines()[1:]
               if line and line.split()[0].isupper() and line.split()[0].isalpha()}
    assert headers == {"QUOTE", "BARS", "LEVELS"}


# 6. mode validation: a provider needs a model; another --agent kind drops the mode's model


def test_mode_with_a_provider_and_no_model_fails_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    modes = tmp_path / "modes.toml"
    modes.write_text('[modes.bare]\nprovider = "openai"\n')
    code, out, err = run(capsys, "simulate", "--modes", str(modes))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert str(modes) in line and "mode 'bare'" in line and "model" in line and "model = " in line


def test_agent_of_another_provider_drops_the_modes_model_url_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-local")
    with serve(by_iteration(PLAN)) as srv:
        modes = tmp_path / "modes.toml"
        modes.write_text(f'[modes.local]\nprovider = "openai"\nmodel = "gpt-5-mini"\n'
                         f'base_url = "{srv.openai_url}"\napi_key_env = "LOCAL_KEY"\n')
        code, _, err = run(capsys, "simulate", "--modes", str(modes), "--mode", "local",
                           "--agent", "anthropic:claude-haiku-4-5", "--base-url", srv.anthropic_url)
        (req,) = srv.requests
        # no model of its own: the mode's openai model is not taken
        code2, out2, err2 = run(capsys, "simulate", "--modes", str(modes), "--mode", "local",
                                "--agent", "anthropic", "--base-url", srv.anthropic_url)
        sent = len(srv.requests)
    assert code == 0, err
    assert req.path == "/v1/messages" and req.body["model"] == "claude-haiku-4-5"
    assert {k.lower(): v for k, v in req.headers.items()}["authorization"] == "Bearer sk-ant-loopback"
    assert "mode 'local'" in err and "model, base_url, api_key_env are not used" in err
    assert code2 == 2 and out2 == "" and sent == 1
    assert err2.strip().splitlines()[-1].endswith(
        "--agent anthropic needs a model: write anthropic:MODEL or pass --model MODEL"
    )


# 7. timeouts: a late reply after the run is recorded; the retry backoff fits the budget

TIMEOUT = 1.0  # the late reply comes at 1.5 x: a loaded machine stalls a thread for ~0.1 s


class LateLastAgent:
    """Blocking; every call answers at once except the last ordinal's, which answers
    `late_s` after it was asked (after the timeout), or hangs until released."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True
    agent_id = "late-last"
    model = "late-last"

    def __init__(self, last: str, late_s: float | None) -> None:
        self.last = last
        self.late_s = late_s
        self.release = threading.Event()

    def author(self, request: AuthorRequest) -> AgentReply:
        if request.ordinal == self.last:
            if self.late_s is None:
                self.release.wait(30)
            else:
                self.release.wait(self.late_s)
            return AgentReply("PASS", Usage(input=700, output=30), latency_ms=1.0)
        return AgentReply("PASS", Usage(input=500, output=20), latency_ms=1.0)


OPTS = SessionOptions(checkpoints=("11:00", "13:30"))


def check_late_recorded(result: SessionResult) -> None:
    late = [e for e in result.evidence if e.kind == "late-reply"]
    assert [(e.ordinal, e.usage.input) for e in late] == [("13:30", 700)]
    cost = run_cost("x", result.evidence, [o for d in result.days for o in d.outcomes])
    assert [(c["ordinal"], c["kind"]) for c in cost["calls"]] == [("OPEN", "reply"), ("11:00", "reply"),
                                                                  ("13:30", "late-reply")]
    assert cost["total"]["input"] == 500 + 500 + 700 and cost["total"]["abandoned"] == 0


def test_a_late_reply_after_the_run_is_recorded_direct() -> None:
    check_late_recorded(run_session(load_sample(), LateLastAgent("13:30", TIMEOUT * 1.5), OPTS,
                                    agent_timeout=TIMEOUT))


@pytest.mark.anyio
async def test_a_late_reply_after_the_run_is_recorded_actors(anyio_backend: str) -> None:
    check_late_recorded(await simulate(load_sample(), LateLastAgent("13:30", TIMEOUT * 1.5), OPTS,
                                       agent_timeout=TIMEOUT))


def test_a_call_still_running_after_the_grace_is_abandoned_with_unknown_cost() -> None:
    agent = LateLastAgent("13:30", None)
    try:
        result = run_session(load_sample(), agent, OPTS, agent_timeout=TIMEOUT)
    finally:
        agent.release.set()
    (rec,) = [e for e in result.evidence if e.kind == "abandoned"]
    assert rec.ordinal == "13:30" and rec.reason is not None and "cost unknown" in rec.reason
    cost = run_cost("x", result.evidence, [o for d in result.days for o in d.outcomes])
    assert [c["kind"] for c in cost["calls"]] == ["reply", "reply", "abandoned"]
    assert cost["total"]["abandoned"] == 1


def test_retries_and_backoff_fit_in_the_agent_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server slower than the whole budget: the provider's own timeout reason arrives
    before the shell's timeout (the SDK's old backoff pushed it past: "timed out after 1s");
    the one attempt had all the budget, so no retry fits after it."""
    with serve(lambda path, body: Canned(delay=2.0)) as srv:
        code, out, err = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), "--agent-timeout", "1",
                             "--backend", "direct", "--json")
        sent = len(srv.requests)
    (turn,) = turns(out)
    assert code == 1 and "the run failed (every call of the run failed)" in err  # its one call failed
    assert "request timed out" in turn["armed"] and "timed out after 1s" not in turn["armed"]
    assert sent == 1


def test_a_fast_failure_is_retried_within_the_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    with serve(lambda path, body: Canned(PLAN) if len(srv.requests) > 1 else Canned(status=503)) as srv:
        code, out, err = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), "--agent-timeout", "5",
                             "--backend", "direct", "--evidence", str(ev), "--json")
        sent = len(srv.requests)
    assert code == 0, err
    assert [t["turn"] for t in turns(out)] == ["PLAN fade"] and sent == 2
    (reply,) = [r for r in evidence(ev) if r["kind"] == "reply"]
    assert 500 <= reply["latency_ms"] < 4500  # the 0.5 s backoff is inside the call


# 8. report and evidence details


def test_cache_reads_and_writes_are_separate_columns(capsys: pytest.CaptureFixture[str]) -> None:
    usage = {"input_tokens": 300, "output_tokens": 28, "cache_read_input_tokens": 1100,
             "cache_creation_input_tokens": 50}
    with serve(lambda path, body: Canned(PLAN, usage=usage)) as srv:
        code, out, _ = run(capsys, "simulate", *agent_args("anthropic", "claude-haiku-4-5", srv))
    assert code == 0
    header = next(line for line in out.splitlines() if " kind " in line and "cache read" in line)
    assert "cache write" in header
    row = next(line for line in out.splitlines() if " reply " in line)
    cells = row.replace("│", " ").split()
    assert cells[cells.index("reply") + 1: cells.index("reply") + 5] == ["1450", "1100", "50", "28"]


def test_truncated_non_terminal_replies_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    with serve(by_iteration(Canned(VIEW, finish="length"), Canned("PLAN x WHEN", finish="length"), PLAN)) as srv:
        code, _, err = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), "--evidence", str(ev))
    assert code == 0, err
    records = {r["kind"]: r for r in evidence(ev) if "latency_ms" in r}
    assert "truncated at the output limit" in records["view-request"]["reason"]
    assert "truncated at the output limit" in records["repair"]["reason"]
    assert "reason" not in records["reply"]  # the last reply was complete


def test_model_calls_are_listed_in_time_order() -> None:
    def rec(ordinal: str, kind: EvidenceKind, latency: float | None, tokens: int = 0) -> Evidence:
        return Evidence(ordinal=ordinal, iteration=0, kind=kind, model="gpt-4o", usage=Usage(input=tokens),
                        budget_exhausted=False, latency_ms=latency, date="2024-04-15")

    records = [rec("OPEN", "reply", 5.0, 10), rec("11:00", "agent-error", None),
               rec("13:00", "reply", 5.0, 30), rec("11:00", "late-reply", 3100.0, 20)]
    cost = run_cost("openai:gpt-4o", records, [])
    assert [(c["ordinal"], c["kind"], c["input"]) for c in cost["calls"]] == [
        ("OPEN", "reply", 10), ("11:00", "late-reply", 20), ("13:00", "reply", 30)]


def test_a_server_without_usage_gets_an_estimate_and_the_budget_binds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_usage(text: str) -> Canned:
        body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}
        return Canned(body=json.dumps(body).encode())

    ev = tmp_path / "ev.jsonl"
    with serve(by_iteration(no_usage(VIEW), no_usage(VIEW), no_usage(PLAN))) as srv:
        code, out, err = run(capsys, "simulate", *agent_args("openai", "qwen3-8b", srv), "--token-budget", "2500",
                             "--evidence", str(ev), "--json")
    assert code == 0, err
    records = evidence(ev)
    (first, *_) = [r for r in records if "latency_ms" in r]
    assert first["usage"]["input"] > 1000 and first["usage"]["output"] > 0  # the card alone is ~1,200
    assert any(r["kind"] == "model-note" and "usage estimated" in r["reason"] for r in records)
    (turn,) = turns(out)
    assert turn["turn"] == "STANDDOWN" and "authoring_token_budget 2500 spent" in turn["armed"]


# --json is the same for the same inputs (latencies are in the evidence file)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_json_is_identical_between_runs(provider: str, capsys: pytest.CaptureFixture[str]) -> None:
    model = "gpt-4o" if provider == "openai" else "claude-haiku-4-5"
    outs = []
    for _ in range(2):
        with serve(by_iteration(VIEW, PLAN)) as srv:
            code, out, err = run(capsys, "simulate", *agent_args(provider, model, srv), "--checkpoints", "11:00",
                                 "--json")
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1]
    cost = json.loads(outs[0])["cost"]
    assert cost["total"]["calls"] == 4
    assert "latency_ms" not in json.dumps(cost)  # measured call latencies stay in the evidence
