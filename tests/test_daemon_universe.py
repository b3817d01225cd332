"""A universe run on the daemon (a real subprocess) through `kestrel ctl submit`: the flags of
`kestrel simulate --data UNIVERSE` (`--symbols`, `--capital`, the portfolio bounds), its ledger
and capture exported byte for byte as `kestrel simulate` writes them and replayed; killed with
SIGKILL mid-run, restarted, it resumes through its committed turns to the same ledger; a run
whose output cannot be written ends failed, its files still exportable; bad universe flags are
refused in one line; `--symbol` still runs one member of a long-format file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_universe_support import long_csv
from daemon_support import DaemonProcess
from kestrel.cli import main
from kestrel.service.daemon.protocol import RunParams, SubmitParams, WaitParams

PLAN = "PLAN a UNTIL 15:45 RISK maxpos 10 maxloss 300\nWHEN pos == 0: BUY 10 MKT\n"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path / "home", backend="asyncio", roots=(tmp_path,))
    d.start()
    yield d
    d.stop()


def _long(path: Path, n_sym: int = 3, n_days: int = 4, seed: int = 3) -> Path:
    """A long-format daily file of `n_sym` symbols `S00..` over `n_days` weekday sessions (a random walk)."""
    return long_csv(path, tuple(f"S{i:02d}" for i in range(n_sym)), n_days, seed, first_day="2023-01-03", top=200.0)


def _module(path: Path, symbols: list[str]) -> Path:
    path.write_text("\n".join(f"PLAN p{i} ON {s}\nWHEN pos == 0 AND last > sma(last, 3): BUY $1500 MKT\n"
                              f"WHEN pos > 0 AND last < sma(last, 3): FLAT" for i, s in enumerate(symbols)) + "\n")
    return path


def _simulate(tmp_path: Path, name: str, flags: list[str]) -> tuple[bytes, bytes]:
    ledger, capture = tmp_path / f"{name}.ledger", tmp_path / f"{name}.capture"
    assert main(["simulate", *flags, "--ledger", str(ledger), "--capture", str(capture), "--json"]) == 0
    return ledger.read_bytes(), capture.read_bytes()


def test_a_universe_run_equals_simulate_and_replays(daemon: DaemonProcess, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv", n_sym=4, n_days=8)
    plan = _module(tmp_path / "m.kes", ["S00", "S01", "S03"])
    flags = ["--data", str(data), "--symbols", "S00,S01,S03", "--capital", "6000", "--max-open", "2",
             "--agent", f"fixed:{plan}", "--days", "6", "--end-of-day", "carry"]
    home = str(daemon.home)
    capsys.readouterr()
    assert main(["ctl", "--home", home, "submit", *flags]) == 0
    run = capsys.readouterr().out.splitlines()[-1]
    assert main(["ctl", "--home", home, "wait", run, "--timeout", "60"]) == 0
    capsys.readouterr()
    assert main(["ctl", "--home", home, "follow", run]) == 0
    followed = capsys.readouterr().out.splitlines()
    assert followed[0].startswith("turn  ") and "PLAN p0 ON S00" in followed[0] and "armed p0 on S00" in followed[0]
    assert any(line.startswith("fill  ") and " S0" in line for line in followed)
    assert followed[-1].startswith("end   done: {") and "final_equity" in followed[-1]
    assert main(["ctl", "--home", home, "show", run]) == 0
    assert "\nmetrics.final_equity " in capsys.readouterr().out
    assert main(["ctl", "--home", home, "show", run, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert shown["state"] == "done" and shown["turns"] == 6 and shown["ledger_events"] > 0
    assert shown["summary"]["symbols"] == ["S00", "S01", "S03"] and len(shown["summary"]["dates"]) == 6
    out = tmp_path / "out"
    out.mkdir()
    assert main(["ctl", "--home", home, "export", run, "--ledger", str(out / "l"), "--capture", str(out / "c")]) == 0
    ledger, capture = _simulate(tmp_path, "ref", flags)
    assert (out / "l").read_bytes() == ledger and (out / "c").read_bytes() == capture
    assert b'"event":"fill"' in ledger
    assert shown["fills"] == ledger.count(b'"event":"fill"')  # a universe ledger line leads with its symbol
    capsys.readouterr()
    assert main(["replay", str(out / "c")]) == 0
    assert "ledger identical" in capsys.readouterr().err


def _run_equals_simulate(daemon: DaemonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         flags: list[str]) -> tuple[Path, bytes, bytes]:
    """Submit `flags`, wait for the run, export it to `tmp_path/out` and check its ledger and
    capture are `kestrel simulate`'s byte for byte; (the export folder, ledger, capture)."""
    home = str(daemon.home)
    capsys.readouterr()
    assert main(["ctl", "--home", home, "submit", *flags]) == 0
    run = capsys.readouterr().out.splitlines()[-1]
    assert main(["ctl", "--home", home, "wait", run, "--timeout", "60"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    assert main(["ctl", "--home", home, "export", run, "--ledger", str(out / "l"), "--capture", str(out / "c")]) == 0
    ledger, capture = _simulate(tmp_path, "ref", flags)
    assert (out / "l").read_bytes() == ledger and (out / "c").read_bytes() == capture
    return out, ledger, capture


def test_a_blind_close_cadence_universe_run_equals_simulate(daemon: DaemonProcess, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv", n_sym=3, n_days=6)
    plan = tmp_path / "blind.kes"  # over the aliases a blind agent reads
    plan.write_text("PLAN a ON SYM1\nWHEN pos == 0 AND SYM2.last > 50: BUY $1000 MKT\n"
                    "PLAN b ON SYM3\nWHEN pos == 0: BUY 10%EQ MKT\n")
    flags = ["--data", str(data), "--agent", f"fixed:{plan}", "--days", "5", "--blind", "--cadence", "close",
             "--arm-latency", "60"]
    out, ledger, capture = _run_equals_simulate(daemon, tmp_path, capsys, flags)
    assert b'"event":"fill"' in ledger
    doc = json.loads(capture)
    assert doc["blind"] is True and doc["cadence"] == "close" and doc["arm_latency"] == 60.0


def test_a_universe_run_with_news_equals_simulate(daemon: DaemonProcess, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv", n_sym=3, n_days=5)
    plan = _module(tmp_path / "m.kes", ["S00", "S02"])
    news = tmp_path / "news.jsonl"
    news.write_text("".join(json.dumps({"published_utc": f"2023-01-0{d}T14:00:00Z", "symbol": s, "source": "Wire",
                                        "title": f"{s} news of day {d}"}) + "\n"
                            for d in (3, 4, 5) for s in ("S00", "S01")))
    flags = ["--data", str(data), "--agent", f"fixed:{plan}", "--days", "4", "--news", str(news),
             "--capital", "8000"]
    out, ledger, capture = _run_equals_simulate(daemon, tmp_path, capsys, flags)
    doc = json.loads(capture)
    assert doc["news"]["path"] == str(news.resolve()) and doc["news"]["items"] == 6
    capsys.readouterr()
    assert main(["replay", str(out / "c")]) == 0
    assert "ledger identical" in capsys.readouterr().err


def _kill_mid_run(d: DaemonProcess, flags: list[str], cwd: Path, turns: int) -> tuple[str, dict[str, object]]:
    """Submit `flags`, SIGKILL the daemon once the run has committed `turns` turns; (the run,
    its `show` just before the kill)."""
    with d.client() as c:
        run = c.call("submit", SubmitParams(flags, str(cwd)))["run"]
        deadline = time.monotonic() + 60
        while c.call("show", RunParams(run))["turns"] < turns and time.monotonic() < deadline:
            time.sleep(0.01)
        before = c.call("show", RunParams(run))
    d.kill9()
    return run, before


def test_a_universe_run_killed_mid_run_resumes_to_the_same_ledger(tmp_path: Path) -> None:
    data = _long(tmp_path / "big.csv", n_sym=6, n_days=130, seed=11)  # long: still running when killed
    symbols = [f"S{i:02d}" for i in range(6)]
    plan = _module(tmp_path / "m.kes", symbols)
    flags = ["--data", str(data), "--capital", "40000", "--max-open", "4", "--agent", f"fixed:{plan}",
             "--days", "120", "--end-of-day", "carry"]
    d = DaemonProcess(tmp_path / "home", backend="trio", roots=(tmp_path,))
    d.start()
    try:
        run, before = _kill_mid_run(d, flags, tmp_path, 3)
        assert before["state"] == "running", before  # killed mid-run: it had not ended
        d.start()
        with d.client() as c:
            info = c.call("wait", WaitParams(run, 240))
            assert (info["state"], info["resumed"]) == ("done", 1), info
            assert info["turns"] == 120
            out = c.call("export", RunParams(run))
    finally:
        d.stop()
    ledger, capture = _simulate(tmp_path, "ref", flags)
    assert out["ledger"].encode() == ledger and out["capture"].encode() == capture


def test_a_run_whose_news_left_the_roots_is_not_resumed(tmp_path: Path) -> None:
    """The roots are checked again at resume: a restart that no longer serves the run's news
    file marks the run failed, naming the flag, before it serves."""
    (tmp_path / "data").mkdir()
    (tmp_path / "news").mkdir()
    data = _long(tmp_path / "data" / "big.csv", n_sym=6, n_days=130, seed=11)
    plan = _module(tmp_path / "m.kes", [f"S{i:02d}" for i in range(6)])
    news = tmp_path / "news" / "n.jsonl"
    news.write_text(json.dumps({"published_utc": "2023-01-03T14:00:00Z", "symbol": "S00", "title": "S00 up"}) + "\n")
    flags = ["--data", str(data), "--agent", f"fixed:{plan}", "--days", "120", "--news", str(news)]
    d = DaemonProcess(tmp_path / "home", backend="asyncio", roots=(tmp_path / "data", tmp_path / "news"))
    d.start()
    try:
        run, before = _kill_mid_run(d, flags, tmp_path, 1)
        if before["state"] != "running":
            pytest.skip("the run ended before the kill (a very fast machine)")
        d = DaemonProcess(tmp_path / "home", backend="asyncio", roots=(tmp_path / "data",))
        d.start()
        with d.client() as c:
            info = c.call("show", RunParams(run))
    finally:
        d.stop()
    assert info["state"] == "failed", info
    assert "cannot resume: --news: data path" in info["reason"] and "outside" in info["reason"], info


def test_a_universe_run_whose_output_cannot_be_written_fails(daemon: DaemonProcess, tmp_path: Path) -> None:
    data = _long(tmp_path / "u.csv", n_sym=6, n_days=30)
    plan = _module(tmp_path / "m.kes", [f"S{i:02d}" for i in range(6)])
    gone = tmp_path / "gone"
    gone.mkdir()
    flags = ["--data", str(data), "--agent", f"fixed:{plan}", "--days", "25", "--ledger", str(gone / "l.jsonl")]
    with daemon.client() as c:
        run = c.call("submit", SubmitParams(flags, str(tmp_path)))["run"]
        gone.rmdir()  # after the submit's checks passed: gone before the run ends
        info = c.call("wait", WaitParams(run, 60))
        out = c.call("export", RunParams(run))
    if info["state"] == "done":  # it ended before the folder went: nothing to check on this machine
        pytest.skip("the run ended before its output folder was removed")
    assert info["state"] == "failed" and "cannot write --ledger" in info["reason"]
    ref_flags = [f for f in flags if f not in ("--ledger", str(gone / "l.jsonl"))]
    ledger, capture = _simulate(tmp_path, "ref", ref_flags)
    assert out["ledger"].encode() == ledger and out["capture"].encode() == capture


def test_bad_universe_flags_are_refused_in_one_line_and_one_member_runs(
        daemon: DaemonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv")
    plan = _module(tmp_path / "m.kes", ["S00", "S01"])
    one = tmp_path / "a.kes"
    one.write_text(PLAN)
    home = str(daemon.home)
    capsys.readouterr()
    for extra, words in ((("--symbols", "S00,S01", "--pace", "100"), "--pace runs a single-symbol session"),
                         (("--symbols", "S00,S01", "--news", str(data)), "published_utc"),
                         (("--symbols", "S00,S01", "--news", "/etc/hostname"), "--news: data path"),
                         (("--symbols", "S00,S01", "--arm-latency", "soon"), "--arm-latency"),
                         (("--symbols", "S00,ZZZ"), "ZZZ"),
                         (("--capital", "-3"), "--capital"),
                         (("--symbols", "S00", "--agent", "baseline"), "needs --agent fixed:PLANS.kes"),
                         (("--symbol", "S00", "--capital", "5000"), "--symbol runs a single-symbol session")):
        argv = ["ctl", "--home", home, "submit", "--data", str(data), "--agent", f"fixed:{plan}", *extra]
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0 and len(err) == 1 and words in err[0] and "Traceback" not in err[0], (extra, err)
    flags = ["--data", str(data), "--symbol", "S01", "--agent", f"fixed:{one}", "--days", "3"]
    assert main(["ctl", "--home", home, "submit", *flags]) == 0
    run = capsys.readouterr().out.splitlines()[-1]
    assert main(["ctl", "--home", home, "wait", run, "--timeout", "60"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    assert main(["ctl", "--home", home, "export", run, "--ledger", str(out / "l"), "--capture", str(out / "c")]) == 0
    assert main(["simulate", *flags, "--ledger", str(out / "ref"), "--json"]) == 0
    assert (out / "l").read_bytes() == (out / "ref").read_bytes()
    assert b'"event":"fill"' in (out / "l").read_bytes()
