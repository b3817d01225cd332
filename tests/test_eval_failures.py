"""Failures are failures: an agent refused by its provider (401, 403), naming an unknown model
(404), that cannot reach its provider (refused connection) or whose every call fails marks the
run failed with the reason; a sweep counts it, shows the reason, ranks it nowhere and exits
non-zero unless --allow-failures. Against the loopback provider (tests/model_server.py) and a
port nothing listens on; no seam of ours is replaced."""

from __future__ import annotations

import csv
import json
import socket
from pathlib import Path

import pytest

from model_cli import run, turns
from model_server import Canned, by_iteration, serve

PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")


def _closed_port_url() -> str:
    """An http URL on 127.0.0.1 at a port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


STATUSES = [(401, "HTTP 401"), (403, "HTTP 403"), (404, "HTTP 404")]


@pytest.mark.parametrize(("status", "reason"), STATUSES)
def test_a_refused_or_unknown_model_run_fails_at_once_in_one_line(
        status: int, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve(lambda path, body: Canned(status=status)) as srv:
        code, out, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", srv.openai_url,
                             "--checkpoints", "11:00,13:30", "--backend", "direct", "--json")
        sent = len(srv.requests)
    assert code == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("kestrel simulate: the run failed") and reason in line, line
    doc = json.loads(out)
    assert doc["failure"]["kind"] == "fatal" and reason in doc["failure"]["reason"]
    assert sent == 1  # never retried, and no later ordinal calls again
    assert [t["turn"] for t in turns(out)] == ["STANDDOWN"] * 3


def test_a_refused_connection_fails_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", _closed_port_url(),
                         "--agent-timeout", "2", "--backend", "direct", "--json")
    assert code == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("kestrel simulate: the run failed") and "connect" in line.lower(), line
    assert json.loads(out)["failure"] is not None


def test_a_bad_answer_stays_a_stand_down_not_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    # the model answered (200) with something that is not a Kestrel statement: a legitimate result
    with serve(lambda path, body: Canned("I think the market will go up.")) as srv:
        code, out, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", srv.openai_url,
                             "--backend", "direct", "--json")
    assert code == 0, err
    assert json.loads(out)["failure"] is None
    assert [t["turn"] for t in turns(out)] == ["STANDDOWN"]


@pytest.mark.parametrize(("status", "reason"), [(401, "HTTP 401"), (404, "HTTP 404"), (500, "HTTP 500")])
def test_a_sweep_counts_a_failing_model_shows_why_and_ranks_it_nowhere(
        status: int, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "sw"
    with serve(lambda path, body: Canned(status=status)) as srv:
        agent = f"openai:gpt-4o@{srv.openai_url}"
        code, out, err = run(capsys, "sweep", "--agents", f"baseline,{agent}", "--days", "2", "--out", str(out_dir),
                             "--jobs", "1", "--agent-timeout", "2", "--json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["failed"] == 2
    board = doc["leaderboard"]
    (line,) = [c for c in board["cells"] if c["cell"]["agent"] == agent]
    assert line["rank"] is None and line["ranked"] is False and line["failed"] == 2
    assert all(c["cell"]["agent"] != agent and c["other"]["agent"] != agent for c in board["comparisons"])
    assert {r["agent"] for r in board["failed_runs"]} == {agent}
    assert all(reason in r["error"] for r in board["failed_runs"])
    ranked = [c["cell"]["agent"] for c in board["cells"] if c["rank"] is not None]
    assert "baseline" in ranked and agent not in ranked
    with (out_dir / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    failed = [r for r in rows if r["agent"] == agent]
    assert len(failed) == 2 and all(reason in r["error"] and r["failure"] for r in failed)
    # --allow-failures accepts them (the rerun skips nothing: failed runs run again)
    with serve(lambda path, body: Canned(status=status)) as srv:
        agent2 = f"openai:gpt-4o@{srv.openai_url}"
        code, out, _ = run(capsys, "sweep", "--agents", f"baseline,{agent2}", "--days", "2",
                           "--out", str(tmp_path / "sw2"), "--jobs", "1", "--agent-timeout", "2", "--allow-failures")
    assert code == 0
    assert "failed 2" in out and reason in out


def test_a_sweep_whose_model_works_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve(by_iteration(PLAN)) as srv:
        code, out, err = run(capsys, "sweep", "--agents", f"baseline,openai:gpt-4o@{srv.openai_url}", "--days", "2",
                             "--out", str(tmp_path / "sw"), "--jobs", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["failed"] == 0 and not doc["leaderboard"]["failed_runs"]
    assert all(c["rank"] is not None for c in doc["leaderboard"]["cells"])
