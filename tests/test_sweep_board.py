"""The sweep leaderboard: failed runs count (a group with failures ranks after complete ones),
buy-and-hold and flat reference lines, a page that names what failed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from html_pages import assert_offline
from kestrel.cli import main
from kestrel.report.board import leaderboard, render_leaderboard, text_lines

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")


def _row(agent: str, k: int, net: float | None, hold: float = 5.0, error: str | None = None) -> dict[str, Any]:
    return {"key": f"{agent}-{k}", "agent": agent, "model": None, "profile": "balanced", "data": "sample",
            "dates": f"2024-04-{k + 1:02d}", "net_pnl": net, "return_on_risk": None if net is None else net / 100,
            "sharpe": None if net is None else 1.0, "max_drawdown": None if net is None else 2.0,
            "trades": 0 if net is None else 1, "wins": 1 if net and net > 0 else 0,
            "buy_and_hold_net_pnl": None if error else hold, "buy_and_hold_return_on_risk": None if error else 0.05,
            "buy_and_hold_sharpe": None if error else 0.5, "buy_and_hold_max_drawdown": None if error else 3.0,
            "ledger_sha256": None if error else "ab" * 32, "error": error}


def _rows() -> list[dict[str, Any]]:
    # "risky": 6 of 10 runs failed, its 4 finished runs lose little; "steady": 10 of 10, loses more
    risky = [_row("risky", k, -0.035) for k in range(4)] + [
        _row("risky", k, None, error="BrokenProcessPool: worker died") for k in range(4, 10)]
    steady = [_row("steady", k, -0.857) for k in range(10)]
    winner = [_row("winner", k, 3.0 if k % 2 else 1.0, hold=7.0) for k in range(10)]
    return risky + steady + winner


def test_failed_runs_rank_a_group_after_the_complete_ones() -> None:
    board = leaderboard(_rows())
    assert [(g["agent"], g["rank"]) for g in board] == [
        ("buy-and-hold", 1), ("winner", 2), ("flat", 3), ("steady", 4), ("risky", 5)]
    risky = board[-1]
    assert (risky["runs"], risky["failed"], risky["net_pnl_mean"]) == (10, 6, -0.035)
    steady = board[3]
    assert (steady["failed"], steady["net_pnl_mean"], steady["net_pnl"]) == (0, -0.857, -8.57)
    hold = board[0]  # the mean of every finished run's own buy-and-hold: (4 + 10) x 5 and 10 x 7
    assert hold["kind"] == "baseline" and hold["runs"] == 24 and hold["net_pnl_mean"] == pytest.approx(140 / 24)
    assert hold["net_pnl"] is None  # runs of different sizes: no meaningful sum
    flat = board[2]
    assert (flat["net_pnl_mean"], flat["max_drawdown"], flat["runs"]) == (0.0, 0.0, 24)
    lines = text_lines(_rows())
    assert lines[0].split()[:2] == ["#", "agent"]
    assert "6 of 10" in lines[5] and lines[5].split()[1] == "risky"


def test_the_page_names_the_failures_the_rule_and_the_baselines() -> None:
    html = render_leaderboard(_rows(), title="Kestrel sweep t")
    page = assert_offline(html)
    text = " ".join(page.text)
    assert "6 of 30 runs failed, in 1 group" in text
    assert '<span class="warn">6 of 10</span>' in html
    assert "Ranking: groups whose runs all finished first" in text
    assert text.count("buy-and-hold") >= 2 and "flat" in text
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    for name in ("net PnL per run (mean)", "run", "sessions", "max drawdown", "round trips", "ledger SHA-256",
                 "error"):
        assert name in heads, name
    assert not [h for h in heads if "_" in h]  # readable names, not raw field names
    assert html.count("worker died") == 6
    assert render_leaderboard(_rows(), title="Kestrel sweep t") == html


def test_a_sweep_stores_each_runs_buy_and_hold_as_its_report_shows_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    assert main(["sweep", "--agents", f"baseline,fixed:{ORB}", "--checkpoints", "11:00", "--out", str(out),
                 "--jobs", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for r in doc["runs"]:
        assert main(["report", "--capture", str(out / "runs" / r["key"] / "capture.jsonl"),
                     "-o", str(tmp_path / "r.html")]) == 0
        summary = capsys.readouterr().out
        m = re.search(r"baseline buy-and-hold: net ([+-][\d.]+)", summary)
        assert m is not None, summary
        assert f"{r['buy_and_hold_net_pnl']:+.2f}" == m.group(1)
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert {"buy_and_hold_net_pnl", "buy_and_hold_sharpe"} <= set(header)
    html = tmp_path / "board.html"
    assert main(["report", "--sweep", str(out), "-o", str(html)]) == 0
    assert "flat" in capsys.readouterr().out
    assert_offline(html.read_text())
