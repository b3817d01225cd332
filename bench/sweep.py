"""Benchmark sweeps: bookkeeping per run, two local processes against one, Dask against local.

Prints one JSON line:
- `per_run_overhead_ms`: the sweep's own cost per run beyond the simulation (keying, writing
  capture/ledger/evidence/result atomically, marking equity and computing metrics, the results
  table), serial: (sweep time - the same runs through `run_session` alone) / runs; target <= 50;
- `speedup_2_jobs`: a grid of 40 runs (2 agents x 2 profiles x 10 seeded samples, each run the
  sample's 6 sessions with checkpoints 11:00 and 13:30) with
  `--jobs 1` (serial) over the same grid on a 2-process `ProcessPoolExecutor`; target >= 1.2 on a
  2-core machine (pool start-up included);
- `machine_speedup_2_procs`: the reference measured in the same run: a pure-Python CPU loop on
  two processes against one; what the machine offers this process right now (about 2.0 on an
  idle 2-core machine, about 1.0 when other work holds the cores). `speedup_2_jobs` can only be
  read against it;
- `dask_vs_local_ratio`: the same grid on a Dask `LocalCluster` (2 worker processes, 127.0.0.1;
  cluster start-up excluded, its workers load the data themselves) over the 2-process pool
  (reported, no target); `null` when Dask is not installed;
- `stats_overhead_ms`: the sweep statistics (`kestrel.report.stats.grid_stats`) and the
  leaderboard built from them (`kestrel.report.stats.board.Board`: its text and its page) for a synthetic 5 agents x 3 profiles x 40 sessions x 5 repeats grid (3,000 session
  records, 390 per-minute returns each, plus buy-and-hold per profile and flat), best of the
  rounds; target <= 500. `stats_vs_plain_bootstrap` reads it against the same number of plain
  iid bootstrap means drawn with numpy alone in the same run (the floor of any bootstrap);
- `calibration_coverage`: the fraction of streams of 40 independent session P&Ls with a known
  mean whose 95% interval covers it, over 1,000 streams of each of the property test's families
  (normal, Student t with 3 degrees of freedom, zero-inflated: trading on half the sessions),
  3,000 in all (target 0.93-0.97; one binomial standard error is about 0.004);
  `calibration_by_stream` gives each family's 1,000 (standard error about 0.007), and two
  strongly skewed ones outside them (trading on 30% of sessions; exponential, skewness 2).
Every timed sweep writes to a fresh directory (nothing is skipped). `--quick` measures the
overhead on fewer runs and the statistics in fewer rounds; the 40-run grid and the 1,000
calibration streams are the same.
Usage: python bench/sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.cli.agentspec import agent_of  # noqa: E402
from kestrel.cli.datanames import load_named as load_data  # noqa: E402
from kestrel.logs import configure_console  # noqa: E402
from kestrel.report.stats.board import Board  # noqa: E402
from kestrel.report.stats import ReturnMoments, SessionRecord, grid_stats, mean_interval  # noqa: E402
from kestrel.report.stats.bootstrap import DRAWS  # noqa: E402
from kestrel.sweep import Grid, SweepRun, expand, run_sweep  # noqa: E402
from kestrel.sweep.pool import local_pool  # noqa: E402
from kestrel.sweep.worker import RunTask, cached_data, simulate  # noqa: E402

ORB = str(Path(__file__).resolve().parent.parent / "examples" / "orb_breakout.kes")


def grid(seeds: int, days: int) -> list[SweepRun]:
    g = Grid(agents=("baseline", f"fixed:{ORB}"), profiles=("balanced", "fast"),
             data=tuple(f"sample|seed={k}" for k in range(1, seeds + 1)), checkpoints=("11:00", "13:30"),
             days=days, days_per_run=days)
    specs = expand(g, lambda name: [s.date.isoformat() for s in cached_data(name, load_data).sessions])
    for s in specs:  # every worker forked from here finds the data loaded
        cached_data(s.data, load_data)
    return specs


def timed_sweep(specs: list[SweepRun], executor: object | None) -> float:
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        out = run_sweep(specs, Path(d), agent_factory=agent_of, data_loader=load_data,
                        executor=executor)  # type: ignore[arg-type]
        took = time.perf_counter() - t
    assert out.ran == len(specs) and out.failed == 0
    return took


def overhead_ms(specs: list[SweepRun], rounds: int) -> float:
    best_sweep = best_bare = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for s in specs:
            simulate(RunTask(s, "k", "", ""), agent_of, load_data)
        best_bare = min(best_bare, time.perf_counter() - t)
        best_sweep = min(best_sweep, timed_sweep(specs, None))
    return max(0.0, (best_sweep - best_bare) / len(specs) * 1000)


def _spin(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def machine_speedup() -> float:
    """Two processes against one on a pure CPU loop (8 chunks of work)."""
    n = 2_000_000
    t = time.perf_counter()
    for _ in range(8):
        _spin(n)
    one = time.perf_counter() - t
    t = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_spin, [n] * 8))
    return one / (time.perf_counter() - t)


def pool_time(specs: list[SweepRun]) -> float:
    t = time.perf_counter()
    with local_pool(2) as pool:  # the pool `kestrel sweep --jobs 2` uses
        with tempfile.TemporaryDirectory() as d:
            out = run_sweep(specs, Path(d), agent_factory=agent_of, data_loader=load_data, executor=pool)
    assert out.ran == len(specs)
    return time.perf_counter() - t


def dask_time(specs: list[SweepRun]) -> float | None:
    try:
        import distributed
    except ImportError:
        return None
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        return timed_sweep(specs, client.get_executor())


def stats_records(agents: int = 5, profiles: int = 3, sessions: int = 40, repeats: int = 5,
                  minutes: int = 390) -> list[SessionRecord]:
    """A synthetic grid's per-session records: agents with different edges over a shared market,
    repeats scattering around each session's outcome; each session's per-minute returns add up to
    its P&L over a risk capital of 400."""
    rng = np.random.default_rng(2014)
    dates = [f"2024-{1 + k // 28:02d}-{1 + k % 28:02d}" for k in range(sessions)]
    market = rng.normal(0.0, 30.0, sessions)
    out: list[SessionRecord] = []

    def add(agent: str, profile: str, repeat: int, s: int, pnl: float, model: bool = False) -> None:
        noise = rng.normal(0.0, 0.002, minutes)
        r = pnl / 400.0 / minutes + noise - noise.mean()
        out.append(SessionRecord(agent, profile, "sample|seed=1", dates[s], round(pnl, 2), round(pnl / 400.0, 9),
                                 ReturnMoments.of(r), repeat=repeat, trades=3 if model else 0,
                                 wins=2 if model else 0, fees=1.5 if model else 0.0,
                                 tokens=4000 if model else None, cost_usd=0.012 if model else None))

    for a in range(agents):
        for p in range(profiles):
            for s in range(sessions):
                day = 2.0 * a - 3.0 + p + 0.4 * market[s] + rng.normal(0.0, 15.0)
                for k in range(repeats):
                    add(f"openai:model-{a}", f"profile-{p}", k, s, day + rng.normal(0.0, 5.0), model=True)
    for p in range(profiles):
        for s in range(sessions):
            add("buy-and-hold", f"profile-{p}", 0, s, float(market[s]))
    for s in range(sessions):
        add("flat", "-", 0, s, 0.0)
    return out


def stats_overhead(records: list[SessionRecord], rounds: int) -> tuple[float, float]:
    """(best ms for the statistics and the leaderboard's text and page, best ms for as many plain numpy iid
    bootstrap means as the statistics draw)."""
    best = ref = float("inf")
    g = grid_stats(records)
    series = 2 * len(g.cells) + len(g.comparisons)
    x = np.random.default_rng(0).normal(0.0, 1.0, 40)
    for _ in range(rounds):
        t = time.perf_counter()
        board = Board([], records)  # the statistics, verdicts and deflated Sharpe behind the leaderboard
        board.text_lines()
        board.html()
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()
        rng = np.random.default_rng(1)
        for _ in range(series):
            x[rng.integers(0, 40, size=(40, DRAWS))].mean(axis=0)
        ref = min(ref, time.perf_counter() - t)
    return best * 1000, ref * 1000


def _streams(rng: np.random.Generator, kind: str, n: int, reps: int) -> np.ndarray:
    """`reps` streams of `n` independent session P&Ls with mean 10."""
    if kind == "normal":
        return 10.0 + 25.0 * rng.standard_normal((reps, n))
    if kind == "student_t3":
        return 10.0 + 25.0 * rng.standard_t(3, (reps, n))
    if kind.startswith("zero_inflated_"):  # trading on that percentage of sessions, mean 10 over all
        rate = int(kind.rsplit("_", 1)[1]) / 100
        return np.where(rng.random((reps, n)) < rate, 10.0 / rate + 25.0 * rng.standard_normal((reps, n)), 0.0)
    return 25.0 * (rng.exponential(1.0, (reps, n)) - 1.0) + 10.0  # skewness 2


PROPERTY_STREAMS = ("normal", "student_t3", "zero_inflated_50")  # the property test's families
SKEWED_STREAMS = ("zero_inflated_30", "exponential")


def calibration(reps: int = 1000, n: int = 40) -> dict[str, float]:
    """Per stream kind, the fraction of `reps` 95% intervals that cover the known mean (10)."""
    out: dict[str, float] = {}
    for k, kind in enumerate(PROPERTY_STREAMS + SKEWED_STREAMS):
        rng = np.random.default_rng(100 + k)
        hits = 0
        for x in _streams(rng, kind, n, reps):
            iv = mean_interval(x, rng)
            hits += iv is not None and iv.low <= 10.0 <= iv.high
        out[kind] = hits / reps
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    configure_console(level="warning")
    specs40 = grid(10, 6)
    small = grid(2 if args.quick else 5, 1)
    over = overhead_ms(small, 2 if args.quick else 3)
    machine = machine_speedup()
    serial = timed_sweep(specs40, None)
    two = pool_time(specs40)
    dask = dask_time(specs40)
    stats_ms, plain_ms = stats_overhead(stats_records(), 2 if args.quick else 5)
    coverage = calibration()
    print(json.dumps({
        "per_run_overhead_ms": round(over, 2),
        "speedup_2_jobs": round(serial / two, 3),
        "machine_speedup_2_procs": round(machine, 3),
        "dask_vs_local_ratio": None if dask is None else round(dask / two, 3),
        "runs": len(specs40),
        "serial_s": round(serial, 3),
        "two_jobs_s": round(two, 3),
        "dask_s": None if dask is None else round(dask, 3),
        "stats_overhead_ms": round(stats_ms, 1),
        "stats_vs_plain_bootstrap": round(stats_ms / plain_ms, 2),
        "calibration_coverage": round(sum(coverage[k] for k in PROPERTY_STREAMS) / len(PROPERTY_STREAMS), 4),
        "calibration_by_stream": coverage,
    }))


if __name__ == "__main__":
    main()
