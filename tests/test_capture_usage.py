"""A model run's capture records each turn's model calls (model, kind, token usage, cached), so
`kestrel replay` and `kestrel report --capture` show the run's model, tokens and dollars
without its evidence file, the same figures as the run's own summary; a replay's capture is the
run's byte for byte; a run of an agent that is not a model captures no such field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from model_cli import agent_args, run
from model_server import by_iteration, serve

VIEW = "VIEW deep: quote, bars(5m, 12), stats BUDGET 800"
PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"
FLAGS = ("--checkpoints", "11:00,13:30", "--backend", "direct")


def _calls(doc: dict[str, Any]) -> tuple[Any, ...]:
    total = doc["cost"]["total"]
    tokens = [t["tokens"] for d in doc["days"] for t in d["turns"]]
    return (total["calls"], total["tokens"], total["input"], total["output"], total["usd"], tokens,
            doc["metrics"]["tokens"], doc["metrics"]["cost_usd"])


def test_replay_and_report_show_the_runs_tokens_and_dollars(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    cap, led, again = tmp_path / "run.cap", tmp_path / "run.led", tmp_path / "again.cap"
    with serve(by_iteration(VIEW, PLAN)) as srv:
        code, out, err = run(capsys, "simulate", *agent_args("openai", "gpt-4o", srv), *FLAGS,
                             "--capture", str(cap), "--ledger", str(led), "--json")
        assert code == 0, err
        calls = len(srv.requests)
    ran = json.loads(out)
    assert ran["cost"]["total"]["calls"] == calls == 6 and ran["cost"]["total"]["usd"] > 0
    turns = [json.loads(line) for line in cap.read_bytes().splitlines()[1:]]
    assert all(len(t["calls"]) == 2 and {c["model"] for c in t["calls"]} == {"gpt-4o"} for t in turns)
    # the replay calls nothing (no server now) and prices the captured calls as the run did
    code, out, err = run(capsys, "replay", str(cap), "--json", "--capture", str(again), "--backend", "direct")
    assert code == 0, err
    assert _calls(json.loads(out)) == _calls(ran)
    assert again.read_bytes() == cap.read_bytes()  # the replay's capture is the run's
    code, text, err = run(capsys, "replay", str(cap), "--backend", "direct")
    assert code == 0, err
    usd = ran["cost"]["total"]["usd"]
    tokens = ran["cost"]["total"]["tokens"]
    assert f"{tokens} tokens" in text and f"${usd:.4f}" in text and "gpt-4o" in text
    html = tmp_path / "report.html"
    code, _, err = run(capsys, "report", "--capture", str(cap), "--ledger", str(led), "--output", str(html))
    assert code == 0, err
    page = html.read_text()
    assert "gpt-4o" in page and f"{usd:.4f}" in page


def test_a_run_without_model_usage_captures_no_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "base.cap"
    code, _, err = run(capsys, "simulate", "--agent", "baseline", *FLAGS, "--capture", str(cap))
    assert code == 0, err
    assert b'"calls"' not in cap.read_bytes()
