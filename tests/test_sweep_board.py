"""The sweep leaderboard from per-session records: intervals and paired verdicts that agree
with our own computation over the sweep's `sessions.csv`, the too-few-sessions warning on
every output (text, page, `--json`, the tables), reference agents computed from the data
alone (the same whichever agents a sweep holds), failed runs unranked with their reason."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from html_pages import assert_offline
from kestrel.cli import main

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")


def _sweep(capsys: pytest.CaptureFixture[str], out: Path, agents: str, *extra: str) -> dict[str, Any]:
    code = main(["sweep", "--agents", agents, "--days", "6", "--out", str(out), "--jobs", "1", "--json", *extra])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0
    return doc


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_paired_verdicts_agree_with_our_own_computation_over_the_sessions(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    doc = _sweep(capsys, out, f"baseline,fixed:{ORB}")
    sessions = _csv(out / "sessions.csv")
    per: dict[str, dict[str, float]] = {}
    for r in sessions:
        per.setdefault(r["agent"], {})[r["date"]] = float(r["net_pnl"])
    assert {"baseline", f"fixed:{ORB}", "buy-and-hold", "flat"} <= set(per)
    comps = {(c["cell"]["agent"], c["other"]["agent"]): c for c in doc["leaderboard"]["comparisons"]}
    assert set(comps) == {(f"fixed:{ORB}", b) for b in ("baseline", "buy-and-hold", "flat")}
    for (a, b), c in comps.items():
        dates = sorted(per[a].keys() & per[b].keys())
        d = np.array([per[a][x] - per[b][x] for x in dates])
        assert c["sessions"] == len(dates) == 6
        assert c["mean_difference"] == pytest.approx(d.mean(), abs=1e-6)
        assert c["low"] <= c["mean_difference"] <= c["high"]
        want = 1.0 if not d.any() else float(scipy_stats.wilcoxon(d, zero_method="wilcox").pvalue)
        assert c["p_value"] == pytest.approx(want, rel=1e-9)
        assert c["p_holm"] >= c["p_value"]
        # the one-line verdict names the pair, the difference, its interval, p and the sessions
        v = c["verdict"]
        assert f"{c['mean_difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] per session" in v
        assert "6 paired sessions" in v and re.search(r"p = [\d.]+", v)
    # the same verdicts on every output: text, page, comparisons.csv
    assert main(["report", "--sweep", str(out), "-o", str(tmp_path / "b.html")]) == 0
    text = capsys.readouterr().out
    page = (tmp_path / "b.html").read_text()
    assert_offline(page)
    table = {(r["agent"], r["other_agent"]): r["verdict"] for r in _csv(out / "comparisons.csv")}
    for key, c in comps.items():
        assert c["verdict"] in text
        assert c["verdict"].replace("'", "&#x27;") in page
        assert table[key] == c["verdict"]


def test_few_sessions_are_warned_about_everywhere(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    doc = _sweep(capsys, out, f"fixed:{ORB}")
    board = doc["leaderboard"]
    assert any("fewer than 30 sessions" in w for w in board["warnings"])
    assert all(c["few_sessions"] for c in board["cells"])
    assert {r["few_sessions"] for r in _csv(out / "cells.csv")} == {"True"}
    assert "fewer than 30 paired sessions" in board["comparisons"][0]["verdict"]
    main(["report", "--sweep", str(out), "-o", str(tmp_path / "b.html")])
    text = capsys.readouterr().out
    assert "Warning: 3 cells with fewer than 30 sessions" in text
    assert '<p class="warn">3 cells with fewer than 30 sessions' in (tmp_path / "b.html").read_text()
    pq = pytest.importorskip("pyarrow.parquet")
    assert set(pq.read_table(out / "cells.parquet").column("few_sessions").to_pylist()) == {True}
    assert "verdict" in pq.read_table(out / "comparisons.parquet").column_names


def test_reference_agents_do_not_depend_on_the_agents_swept(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def reference(agents: str, name: str) -> list[tuple[str, str, str]]:
        doc = _sweep(capsys, tmp_path / name, agents)
        return sorted((c["cell"]["agent"], f"{c['net_pnl']['mean']:.6f}", f"{c['net_pnl']['sd']:.6f}")
                      for c in doc["leaderboard"]["cells"] if c["cell"]["agent"] in ("buy-and-hold", "flat"))

    one = reference("baseline", "a")
    two = reference(f"baseline,fixed:{ORB}", "b")
    assert one == two and [a for a, _, _ in one] == ["buy-and-hold", "flat"]


def test_each_cell_ranks_by_mean_net_pnl_per_session_with_its_interval(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    doc = _sweep(capsys, out, f"baseline,fixed:{ORB}")
    cells = [c for c in doc["leaderboard"]["cells"] if c["rank"] is not None]
    means = [c["net_pnl"]["mean"] for c in sorted(cells, key=lambda c: c["rank"])]
    assert means == sorted(means, reverse=True)
    sessions = _csv(out / "sessions.csv")
    for c in cells:
        mine = [float(r["net_pnl"]) for r in sessions if r["agent"] == c["cell"]["agent"]]
        assert c["sessions"] == len(mine) == 6
        assert c["net_pnl"]["mean"] == pytest.approx(float(np.mean(mine)), abs=1e-6)
        assert c["net_pnl"]["sd"] == pytest.approx(float(np.std(mine, ddof=1)), abs=1e-6)
        assert c["net_pnl"]["low"] <= c["net_pnl"]["mean"] <= c["net_pnl"]["high"]
        assert c["trades"] == sum(int(r["trades"]) for r in sessions if r["agent"] == c["cell"]["agent"])
