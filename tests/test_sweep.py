"""Sweeps: keys, grids, serial == processes == Dask byte for byte, a failing run, resumption
after a killed sweep, the CLI and its JSON."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from html_pages import assert_offline
from kestrel.cli import main
from kestrel.cli.agentspec import agent_of
from kestrel.cli.datanames import load_named as load_data
from shared_paths import SHARED_DATA
from kestrel.sweep import Grid, SweepRun, SweepError, expand, run_key, run_sweep, stored_rows

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")


def _ledgers(out: Path) -> dict[str, bytes]:
    return {p.name: (p / "ledger.jsonl").read_bytes() for p in (out / "runs").iterdir() if not p.name.startswith(".")}


def _specs() -> list[SweepRun]:
    grid = Grid(agents=("baseline", f"fixed:{ORB}"), profiles=("balanced", "fast"),
                data=("sample", "sample|seed=3"), checkpoints=("11:00",))
    return expand(grid, lambda name: [s.date.isoformat() for s in load_data(name).sessions])


def failing_agent(spec: str) -> Any:
    """An agent factory whose `boom` agent cannot be built: that run fails, the others run."""
    if spec == "boom":
        raise RuntimeError("no such model endpoint")
    return agent_of(spec)


def test_run_key_hashes_the_spec_and_the_data() -> None:
    s = SweepRun("baseline", "balanced", "sample", ("2024-04-15",))
    k = run_key(s, "a" * 64)
    assert k == run_key(SweepRun("baseline", "balanced", "sample", ("2024-04-15",)), "a" * 64)
    assert len({k, run_key(s, "b" * 64), run_key(SweepRun("baseline", "fast", "sample", ("2024-04-15",)), "a" * 64),
                run_key(s, "a" * 64, agent_sha256="c" * 64)}) == 4


def test_expand_orders_runs_and_checks_days() -> None:
    grid = Grid(agents=("a", "b"), profiles=("p",), data=("d",), days=3)
    specs = expand(grid, lambda _: ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"])
    assert [(s.agent, s.dates) for s in specs] == [
        ("a", ("2024-01-03",)), ("a", ("2024-01-04",)), ("a", ("2024-01-05",)),
        ("b", ("2024-01-03",)), ("b", ("2024-01-04",)), ("b", ("2024-01-05",))]
    two = expand(Grid(agents=("a",), data=("d",), days=2, days_per_run=2, date="2024-01-04"),
                 lambda _: ["2024-01-02", "2024-01-03", "2024-01-04"])
    assert [s.dates for s in two] == [("2024-01-03", "2024-01-04")]
    with pytest.raises(SweepError, match="no session on 2024-02-01"):
        expand(Grid(agents=("a",), date="2024-02-01"), lambda _: ["2024-01-02"])
    with pytest.raises(SweepError, match="only 1 sessions"):
        expand(Grid(agents=("a",), days=2), lambda _: ["2024-01-02"])


def test_serial_processes_and_dask_give_the_same_ledgers(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    specs = _specs()
    assert len(specs) == 8
    serial = run_sweep(specs, tmp_path / "serial", agent_factory=agent_of, data_loader=load_data)
    assert (serial.ran, serial.skipped, serial.failed) == (8, 0, 0)
    with ProcessPoolExecutor(max_workers=2) as pool:
        procs = run_sweep(specs, tmp_path / "procs", agent_factory=agent_of, data_loader=load_data, executor=pool)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        dask = run_sweep(specs, tmp_path / "dask", agent_factory=agent_of, data_loader=load_data,
                         executor=client.get_executor())
    ledgers = _ledgers(tmp_path / "serial")
    assert len(ledgers) == 8 and len(set(ledgers.values())) >= 2
    assert _ledgers(tmp_path / "procs") == ledgers
    assert _ledgers(tmp_path / "dask") == ledgers
    assert serial.rows == procs.rows == dask.rows
    csvs = {(tmp_path / d / "results.csv").read_bytes() for d in ("serial", "procs", "dask")}
    assert len(csvs) == 1
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "serial" / "results.parquet")
    assert table.num_rows == 8 and "ledger_sha256" in table.column_names and "sharpe" in table.column_names


def test_a_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    specs = [SweepRun(a, "balanced", "sample", ("2024-04-15",)) for a in ("baseline", "boom", f"fixed:{ORB}")]
    with ProcessPoolExecutor(max_workers=2) as pool:
        out = run_sweep(specs, tmp_path, agent_factory=failing_agent, data_loader=load_data, executor=pool)
    assert (out.ran, out.failed) == (2, 1)
    failed = [r for r in out.rows if r["error"]]
    assert [r["agent"] for r in failed] == ["boom"]
    assert failed[0]["error"] == "RuntimeError: no such model endpoint"
    assert not (tmp_path / "runs" / failed[0]["key"]).exists()
    assert "no such model endpoint" in (tmp_path / "results.csv").read_text()
    # a rerun skips the finished runs and retries the failed one
    again = run_sweep(specs, tmp_path, agent_factory=failing_agent, data_loader=load_data)
    assert (again.ran, again.skipped, again.failed) == (0, 2, 1)


def _sweep_cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kestrel", "sweep", "--agents", f"baseline,fixed:{ORB}",
            "--profiles", "balanced,fast,thorough",
            "--data", ",".join(["sample"] + [f"sample|seed={k}" for k in range(1, 4)]),
            "--out", str(out), "--jobs", "1", *extra]


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "sw"
    proc = subprocess.Popen(_sweep_cmd(out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    runs = out / "runs"
    while time.monotonic() < deadline:
        done = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.is_dir() else []
        if len(done) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.name for p in runs.iterdir() if not p.name.startswith(".")}
    assert before, "the sweep was killed before finishing any run"
    assert all((runs / k / "result.json").exists() for k in before)  # only complete runs are in place
    res = subprocess.run(_sweep_cmd(out, "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["skipped"] == len(before) and doc["ran"] == 24 - len(before) and doc["failed"] == 0
    assert len(doc["runs"]) == 24 and all(r["ledger_sha256"] for r in doc["runs"])
    assert not [p for p in runs.iterdir() if p.name.startswith(".tmp")]
    # every ledger is the one its key names
    import hashlib

    for r in doc["runs"]:
        assert hashlib.sha256((runs / r["key"] / "ledger.jsonl").read_bytes()).hexdigest() == r["ledger_sha256"]
    # a third run skips everything
    res = subprocess.run(_sweep_cmd(out, "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    doc3 = json.loads(res.stdout)
    assert (doc3["ran"], doc3["skipped"]) == (0, 24) and doc3["runs"] == doc["runs"]


def test_cli_grid_file_json_and_leaderboard(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    out = tmp_path / "sw"
    grid.write_text(f'agents = ["baseline", "fixed:{ORB}"]\nprofiles = ["balanced", "fast"]\n'
                    f'data = ["sample"]\ncheckpoints = ["11:00"]\nout = "{out}"\njobs = 1\n')
    assert main(["sweep", str(grid), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["ran"], doc["skipped"], doc["failed"]) == (4, 0, 0)
    for r in doc["runs"]:
        assert {"key", "ledger_sha256", "net_pnl", "sharpe", "max_drawdown", "agent", "profile"} <= set(r)
    assert len(stored_rows(out)) == 4
    html = tmp_path / "board.html"
    assert main(["report", "--sweep", str(out), "-o", str(html)]) == 0
    text = capsys.readouterr().out
    assert "baseline" in text and "net PnL" in text
    page = assert_offline(html.read_text())
    assert "leaderboard" in " ".join(page.text)


def test_cli_sweep_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["sweep", "--agents", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown --agent" in capsys.readouterr().err
    assert main(["sweep", "--agents", "baseline"]) == 2
    assert "--out DIR" in capsys.readouterr().err
    assert main(["sweep", "--agents", "baseline", "--profiles", "zzz", "--out", str(tmp_path)]) == 2
    assert main(["sweep", "--agents", "baseline", "--date", "1999-01-01", "--out", str(tmp_path)]) == 2
    assert "no session on 1999-01-01" in capsys.readouterr().err
    bad = tmp_path / "g.toml"
    bad.write_text('agents = ["baseline"]\nout = "x"\ncolour = 3\n')
    assert main(["sweep", str(bad)]) == 2
    assert "colour" in capsys.readouterr().err


def test_one_sweep_per_directory_and_stale_temporaries_are_removed(tmp_path: Path) -> None:
    from kestrel.sweep.run import owned

    stale = tmp_path / "runs" / ".tmp-abc-123"
    stale.mkdir(parents=True)
    (stale / "ledger.jsonl").write_bytes(b"half")
    specs = [SweepRun("baseline", "balanced", "sample", ("2024-04-15",))]
    with owned(tmp_path):
        assert not stale.exists()
        with pytest.raises(SweepError, match="another sweep is writing"):
            run_sweep(specs, tmp_path, agent_factory=agent_of, data_loader=load_data)
    assert run_sweep(specs, tmp_path, agent_factory=agent_of, data_loader=load_data).ran == 1


def test_without_a_date_a_sweep_ends_at_the_last_complete_session(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    fx = SHARED_DATA / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
    if not fx.exists():
        pytest.skip("shared data not present")
    assert main(["sweep", "--agents", "baseline", "--data", str(fx), "--days", "2", "--out", str(tmp_path),
                 "--jobs", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["dates"] for r in doc["runs"]] == ["2014-05-13", "2014-05-14"]  # 05-15 is a 3-hour stub


def _replays(capsys: pytest.CaptureFixture[str], out: Path) -> int:
    """Replay every run's capture with --expect-ledger its ledger; returns how many verified."""
    n = 0
    for d in sorted(p for p in (out / "runs").iterdir() if not p.name.startswith(".")):
        code = main(["replay", str(d / "capture.jsonl"), "--expect-ledger", str(d / "ledger.jsonl")])
        err = capsys.readouterr().err
        assert code == 0, err
        assert "ledger identical" in err
        n += 1
    return n


def test_a_sweeps_captures_replay_and_verify(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    assert main(["sweep", "--agents", f"baseline,fixed:{ORB}", "--data", "sample|seed=2", "--days", "2",
                 "--days-per-run", "2", "--checkpoints", "11:00", "--out", str(out), "--jobs", "1", "--json"]) == 0
    capsys.readouterr()
    for d in (out / "runs").iterdir():
        header = json.loads((d / "capture.jsonl").read_bytes().splitlines()[0])
        assert header["source"]["kind"] == "sample" and header["source"]["seed"] == 2
        assert header["engine"] is not None
    assert _replays(capsys, out) == 2


def test_a_sweeps_captures_of_a_file_replay_and_verify(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       shared_data: Path) -> None:
    fxcm = shared_data / "fx_quote_ticks" / "lean_fxcm_eurusd_quote_ticks_20140501_20140515.parquet"
    out = tmp_path / "sw"
    assert main(["sweep", "--agents", f"baseline,fixed:{ORB}", "--data", f"{fxcm}|crossed=drop",
                 "--date", "2014-05-13", "--out", str(out), "--jobs", "2", "--json"]) == 0
    capsys.readouterr()
    for d in (out / "runs").iterdir():
        source = json.loads((d / "capture.jsonl").read_bytes().splitlines()[0])["source"]
        assert (source["kind"], source["path"], source["crossed"]) == ("file", str(fxcm), "drop")
        assert source["sha256"] == hashlib.sha256(fxcm.read_bytes()).hexdigest()
    assert _replays(capsys, out) == 2
