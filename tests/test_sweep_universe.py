"""`kestrel sweep` over a universe: each cell a portfolio session on one account; the
leaderboard's baselines are the universe's equal-weight buy-and-hold and cash, computed from the
data (checked here against the file's own rows) and the same whichever agents the sweep holds;
results keyed and resumed; a cell's capture replays to its ledger; agents that cannot trade a
universe and grids mixing universes with single files are refused with one line."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from cli_helpers import run_cli

DAYS = ["2024-03-04", "2024-03-05", "2024-03-06", "2024-03-07", "2024-03-08", "2024-03-11"]
PRICES = {"AAA": (50.0, 1.0), "BBB": (20.0, -0.5)}  # (first open, change per session)


def _bar(sym: str, i: int) -> tuple[float, float]:
    base, step = PRICES[sym]
    return base + step * i, base + step * i + step / 2  # (open, close)


def _universe(path: Path) -> Path:
    rows = ["date,symbol,open,high,low,close,volume"]
    for i, d in enumerate(DAYS):
        for sym in PRICES:
            o, c = _bar(sym, i)
            rows.append(f"{d},{sym},{o:.2f},{max(o, c) + 0.25:.2f},{min(o, c) - 0.25:.2f},{c:.2f},{1000 + i}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _sessions(out: Path) -> list[dict[str, str]]:
    with open(out / "sessions.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def plans(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "both.kes", tmp_path / "one.kes"
    a.write_text("PLAN a ON AAA\nWHEN pos == 0: BUY 10 MKT\nPLAN b ON BBB\nWHEN pos == 0: BUY 20 MKT\n")
    b.write_text("PLAN a ON AAA\nWHEN pos == 0: SELL 5 MKT\n")
    return a, b


def test_a_universe_sweep_runs_portfolio_cells_against_the_universe_baselines(
        tmp_path: Path, plans: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    data = _universe(tmp_path / "u.csv")
    out = tmp_path / "sweep"
    argv = ["sweep", "--data", f"{data}|capital=10000", "--agents", f"fixed:{plans[0]},fixed:{plans[1]}",
            "--days", "6", "--days-per-run", "3", "--jobs", "1", "--out", str(out), "--json"]
    code, text, err = run_cli(capsys, *argv)
    assert code == 0, err
    doc = json.loads(text)
    assert doc["ran"] == 4 and doc["failed"] == 0
    rows = doc["runs"]
    assert [r["dates"] for r in rows] == [",".join(DAYS[:3]), ",".join(DAYS[3:])] * 2
    assert all(r["error"] is None and r["fills"] > 0 for r in rows)
    # the baselines, from the rows written above: 10000 split equally, whole shares at each run's
    # first open, held to its last close; cash never moves
    sessions = _sessions(out)
    for run in (DAYS[:3], DAYS[3:]):
        first, last = DAYS.index(run[0]), DAYS.index(run[-1])
        expected = sum(math.floor(5000 / _bar(s, first)[0]) * (_bar(s, last)[1] - _bar(s, first)[0]) for s in PRICES)
        got = sum(float(r["net_pnl"]) for r in sessions
                  if r["agent"] == "equal-weight buy-and-hold" and r["date"] in run)
        assert got == pytest.approx(expected, abs=0.01)
    cash = [r for r in sessions if r["agent"] == "cash"]
    assert len(cash) == 6 and all(float(r["net_pnl"]) == 0.0 for r in cash)
    assert {r["agent"] for r in sessions} == {"equal-weight buy-and-hold", "cash", f"fixed:{plans[0]}",
                                              f"fixed:{plans[1]}"}
    # the per-session records of a cell add up to its run's net PnL
    for r in rows:
        mine = [float(s["net_pnl"]) for s in sessions if s["agent"] == r["agent"] and s["date"] in r["dates"]]
        assert sum(mine) == pytest.approx(r["net_pnl"], abs=1e-6)

    # resumed: nothing runs again
    code, text, err = run_cli(capsys, *argv)
    assert code == 0, err
    again = json.loads(text)
    assert again["ran"] == 0 and again["skipped"] == 4

    # a cell's capture replays to its ledger
    cell = out / "runs" / rows[0]["key"]
    code, _, err = run_cli(capsys, "replay", str(cell / "capture.json"), "--expect-ledger", str(cell / "ledger.jsonl"))
    assert code == 0, err

    # the baselines do not depend on the agents the sweep holds
    alone = tmp_path / "alone"
    code, _, err = run_cli(capsys, "sweep", "--data", f"{data}|capital=10000", "--agents", f"fixed:{plans[1]}",
                           "--days", "6", "--days-per-run", "3", "--jobs", "1", "--out", str(alone), "--json")
    assert code == 0, err
    refs = ("equal-weight buy-and-hold", "cash")
    assert [r for r in _sessions(alone) if r["agent"] in refs] == [r for r in sessions if r["agent"] in refs]


def test_universe_sweeps_refuse_what_cannot_run(tmp_path: Path, plans: tuple[Path, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = _universe(tmp_path / "u.csv")
    single = tmp_path / "one.csv"
    single.write_text("date,open,high,low,close,volume\n2024-03-04,1,1,1,1,1\n2024-03-05,1,1,1,1,1\n")
    out = str(tmp_path / "sweep")
    cases = [
        (["--data", str(data), "--agents", f"baseline,fixed:{plans[0]}"], "drop baseline from --agents"),
        (["--data", f"{data},{single}", "--agents", f"fixed:{plans[0]}"], "all universes or all single-symbol"),
        (["--data", str(data), "--agents", f"fixed:{tmp_path / 'nope.kes'}"], "nope.kes"),
        (["--data", f"{data}|capital=-3", "--agents", f"fixed:{plans[0]}"], "capital= must be a positive amount"),
    ]
    for flags, words in cases:
        code, _, err = run_cli(capsys, "sweep", *flags, "--jobs", "1", "--out", out)
        assert code == 2, (flags, err)
        assert len(err.strip().splitlines()) == 1 and words in err, err
    assert not (tmp_path / "sweep" / "runs").exists()


def test_one_member_of_a_long_file_sweeps_as_a_single_symbol(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    data = _universe(tmp_path / "u.csv")
    plan = tmp_path / "p.kes"
    plan.write_text("PLAN a UNTIL 15:45 RISK maxpos 10 maxloss 300\nWHEN pos == 0: BUY 10 MKT\n")
    code, text, err = run_cli(capsys, "sweep", "--data", f"{data}|symbol=BBB", "--agents", f"fixed:{plan}", "--days",
                              "2", "--jobs", "1", "--out", str(tmp_path / "sweep"), "--json")
    assert code == 0, err
    doc = json.loads(text)
    assert doc["ran"] == 2 and all(r["error"] is None for r in doc["runs"])
    refs = {r["agent"] for r in _sessions(tmp_path / "sweep")} - {f"fixed:{plan}"}
    assert refs == {"buy-and-hold", "flat"}


def test_a_blind_universe_sweep_runs_blind_and_its_cells_replay(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`--blind` reaches a universe cell: its module is written over the aliases (each alias
    one of AAA and BBB) and trades the real symbols; the capture records blind and
    replays to the cell's ledger."""
    data = _universe(tmp_path / "u.csv")
    blind = tmp_path / "blind.kes"
    blind.write_text("PLAN a ON SYM1\nWHEN pos == 0: BUY 10 MKT\nPLAN b ON SYM2\nWHEN pos == 0: BUY 20 MKT\n")
    out = tmp_path / "sweep"
    code, text, err = run_cli(capsys, "sweep", "--data", f"{data}|capital=10000", "--agents", f"fixed:{blind}",
                              "--days", "3", "--jobs", "1", "--blind", "--out", str(out), "--json")
    assert code == 0, err
    row = json.loads(text)["runs"][0]
    assert row["error"] is None and row["blind"] is True and row["fills"] == 2
    cell = out / "runs" / row["key"]
    assert json.loads((cell / "capture.json").read_text())["blind"] is True
    ledger = (cell / "ledger.jsonl").read_text()
    assert '"symbol":"AAA"' in ledger and '"symbol":"BBB"' in ledger and "SYM1" not in ledger
    code, _, err = run_cli(capsys, "replay", str(cell / "capture.json"), "--expect-ledger", str(cell / "ledger.jsonl"))
    assert code == 0, err
