"""The leaderboard's reference rows come from the data and the spec, never from which agents a
sweep holds: two sweeps over the same sessions with disjoint agent sets store the same
buy-and-hold and flat rows; a universe's reference records (equal-weight buy-and-hold, cash)
against our own computation from the raw file, and ranked as baselines."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.data.universe import load_universe
from kestrel.report.stats import grid_stats
from kestrel.report.stats.baselines import universe_baseline_records
from kestrel.report.stats.records import SessionRecord
from universe_support import STOCKBENCH, our_equal_weight, raw_bars

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")
REFERENCE = ("buy-and-hold", "flat")


def _reference_rows(capsys: pytest.CaptureFixture[str], out: Path, agents: str) -> list[dict[str, str]]:
    code = main(["sweep", "--agents", agents, "--days", "4", "--out", str(out), "--jobs", "1", "--json"])
    json.loads(capsys.readouterr().out)
    assert code == 0
    with (out / "sessions.csv").open() as f:
        return [r for r in csv.DictReader(f) if r["agent"] in REFERENCE]


def test_disjoint_agent_sets_give_the_same_reference_rows(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one = _reference_rows(capsys, tmp_path / "a", "baseline")
    two = _reference_rows(capsys, tmp_path / "b", f"fixed:{ORB}")
    assert one == two
    assert sorted({r["agent"] for r in one}) == list(REFERENCE) and len(one) == 8  # 2 agents x 4 sessions
    assert any(float(r["net_pnl"]) != 0.0 for r in one if r["agent"] == "buy-and-hold")
    assert all(float(r["net_pnl"]) == 0.0 for r in one if r["agent"] == "flat")


def test_universe_reference_records_match_our_computation_and_rank_as_baselines(shared_data: Path) -> None:
    universe = load_universe(shared_data / STOCKBENCH).universe
    first, last = dt.date(2025, 2, 3), dt.date(2025, 3, 14)
    dates = [s.date.isoformat() for s in universe.sessions if first <= s.date <= last]
    records = universe_baseline_records(universe, dates, data_name="dow20", capital=100_000.0)
    assert records == universe_baseline_records(universe, dates, data_name="dow20", capital=100_000.0)
    ew = [r for r in records if r.agent == "equal-weight buy-and-hold"]
    flat = [r for r in records if r.agent == "cash"]
    assert [r.date for r in ew] == [r.date for r in flat] == dates
    _, _, equity = our_equal_weight(raw_bars(shared_data / STOCKBENCH), 100_000.0, first, last)
    closes = [equity[d] for d in sorted(equity)]
    want = [b - a for a, b in zip([100_000.0] + closes[:-1], closes)]
    for r, w in zip(ew, want):
        assert abs(r.net_pnl - w) <= 0.01, r.date  # two closes, each to the cent
    assert abs(sum(r.net_pnl for r in ew) - (closes[-1] - 100_000.0)) <= 0.005 + 1e-6
    assert all(r.net_pnl == 0.0 and r.returns.mean == 0.0 for r in flat)
    # an agent's records beside them: the reference cells are baselines, compared against
    agent = [SessionRecord("fixed:x", "balanced", "dow20", d, 10.0, 0.0001) for d in dates]
    stats = grid_stats(records + agent)
    kinds = {c.cell.agent: c.baseline for c in stats.cells}
    assert kinds == {"equal-weight buy-and-hold": True, "cash": True, "fixed:x": False}
    assert {(c.cell.agent, c.other.agent) for c in stats.comparisons} == {
        ("fixed:x", "equal-weight buy-and-hold"), ("fixed:x", "cash")}
