"""A `--jobs 2` sweep killed with SIGKILL: its workers die with it, nothing holds the
directory, and a resume right away finishes the grid with the ledgers of an uninterrupted
sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc to find workers")


def _cmd(out: Path, jobs: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kestrel", "sweep", "--agents", f"baseline,fixed:{ORB}",
            "--profiles", "balanced,fast,thorough",
            "--data", ",".join(["sample"] + [f"sample|seed={k}" for k in range(1, 4)]),
            "--out", str(out), "--jobs", str(jobs), *extra]


def _sweepers(out: Path) -> list[int]:
    """Pids of live processes running a sweep into `out` (forked workers share its command line)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(out).encode() in argv and state != "Z":
            pids.append(int(p.name))
    return pids


def _ledgers(out: Path) -> dict[str, bytes]:
    return {p.name: (p / "ledger.jsonl").read_bytes() for p in (out / "runs").iterdir()
            if not p.name.startswith(".")}


def test_a_killed_parallel_sweep_leaves_no_worker_and_resumes_at_once(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(out, 2), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = out / "runs"
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            done = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.is_dir() else []
            if len(done) >= 3 and len(_sweepers(out)) >= 3:  # the parent and both workers are up
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = {p.name for p in runs.iterdir() if not p.name.startswith(".")}
        # resume at once: the killed sweep's lock must not outlive it
        res = subprocess.run(_cmd(out, 2, "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["failed"] == 0 and doc["ran"] + doc["skipped"] == 24 and doc["skipped"] >= len(before)
        # the killed sweep's workers are gone (the kernel killed them with their parent)
        wait_until = time.monotonic() + 10
        while _sweepers(out) and time.monotonic() < wait_until:
            time.sleep(0.05)
        assert _sweepers(out) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _sweepers(out):  # never leave strays behind, even when the test fails
            os.kill(pid, signal.SIGKILL)
    assert not [p for p in runs.iterdir() if p.name.startswith(".tmp")]
    whole = tmp_path / "whole"
    res = subprocess.run(_cmd(whole, 1, "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["ran"] == 24
    assert _ledgers(out) == _ledgers(whole)
    assert (out / "results.csv").read_bytes() == (whole / "results.csv").read_bytes()


def test_ctrl_c_at_a_terminal_interrupts_a_parallel_sweep_with_one_line(tmp_path: Path) -> None:
    """Ctrl-C signals the whole foreground process group (the sweep and its workers): the
    sweep prints one line and exits 130, the workers stay quiet and die with it."""
    out = tmp_path / "interrupted"
    busy = ",".join(f"{h:02d}:{m:02d}" for h in range(10, 16) for m in (0, 10, 20, 30, 40, 50))
    proc = subprocess.Popen(_cmd(out, 2, "--checkpoints", busy), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    runs = out / "runs"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        done = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.is_dir() else []
        if len(done) >= 2 and len(_sweepers(out)) >= 3:  # the parent and both workers are up
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert [line for line in err.splitlines() if line.strip()] == ["kestrel: interrupted"]
    gone = time.monotonic() + 10
    while _sweepers(out) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not _sweepers(out)
