"""Ctrl-C: `kestrel simulate` exits 130 within a second or two with one line and no traceback,
on asyncio, trio and direct, at any moment (imports, loading, the event loop, worker threads),
and never hangs. Real subprocesses, real SIGINT, a deadline after which the test fails."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 5.0  # after the signal; the observed worst case is ~0.1 s
# after the interpreter reached Kestrel's first line (see `startup`): Kestrel's own imports,
# loading, the event loop and the engine's worker threads
# an authoring turn every 20 minutes of the 24-hour FX session: a run of ~20 s to interrupt
CHECKPOINTS = ",".join(f"{h:02d}:{m:02d}" for h in [*range(17, 24), *range(16)] for m in (0, 20, 40))[6:]
DELAYS_S = (0.03, 0.06, 0.1, 0.2, 0.35, 0.6, 1.0, 1.5, 2.2, 3.2, 4.5)


@pytest.fixture(scope="module")
def startup() -> float:
    """How long a bare interpreter takes to import `kestrel` (the handler is installed at
    its top). Before that point Python's own start-up runs, which no program can guard: a
    signal there ends the process by Python's default rules."""
    runs = []
    for _ in range(3):
        t = time.monotonic()
        subprocess.run([sys.executable, "-c", "import kestrel"], check=True, cwd=ROOT)
        runs.append(time.monotonic() - t)
    return sorted(runs)[1]


@pytest.fixture(scope="module")
def long_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 sessions of generated quotes as Parquet: a run long enough to interrupt late."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from kestrel.data import SyntheticSpec, generate

    md = generate(SyntheticSpec(sessions=60, tick_interval_s=2.0), seed=11)
    t = md.ticks
    path = tmp_path_factory.mktemp("long") / "quotes.parquet"
    pq.write_table(pa.table({"ts_event": pa.array(t.ts, pa.timestamp("ns", tz="UTC")),
                             "bid": pa.array(t.bid), "ask": pa.array(t.ask)}), path)
    return path


@pytest.mark.parametrize("backend", ["asyncio", "trio", "direct"])
def test_sigint_exits_130_with_one_line_at_any_moment(
    backend: str, long_data: Path, startup: float, tmp_path: Path
) -> None:
    failures = []
    turns_kept: list[int] = []
    for k, delay in enumerate(DELAYS_S):
        capture = tmp_path / f"c{k}.jsonl"
        proc = subprocess.Popen(
            [sys.executable, "-m", "kestrel", "simulate", "--backend", backend, "--data", str(long_data),
             "--preset", "oanda", "--days", "60", "--checkpoints", CHECKPOINTS, "--engine-path", "reference",
             "--capture", str(capture)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
        time.sleep(startup + delay)
        assert proc.poll() is None, f"the run ended before the signal at {delay}s: {proc.communicate()[1]}"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            _, err = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            failures.append(f"{delay}s: still running {DEADLINE_S}s after SIGINT (hang)")
            continue
        took = time.monotonic() - sent
        lines = [ln for ln in err.splitlines() if not ln.startswith("kestrel simulate: ")]  # load notes
        if proc.returncode != 130 or lines != ["kestrel: interrupted"] or took > 2.0:
            failures.append(f"{delay}s: exit {proc.returncode} after {took:.2f}s, stderr {err[-500:]!r}")
        if capture.exists() and capture.stat().st_size:  # every line written so far is a whole record
            records = [json.loads(line) for line in capture.read_bytes().splitlines()]
            assert records[0]["record"] == "header" and records[0]["ledger_sha256"] is None  # incomplete
            assert all(r["record"] == "turn" for r in records[1:])
            turns_kept.append(len(records) - 1)
    assert not failures, "\n".join(failures)
    assert max(turns_kept, default=0) > 0  # the late interrupts kept the turns taken so far
