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
  (reported, no target); `null` when Dask is not installed.
Every timed sweep writes to a fresh directory (nothing is skipped). `--quick` measures the
overhead on fewer runs; the 40-run grid is the same.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.cli.agentspec import agent_of  # noqa: E402
from kestrel.cli.datanames import load_named as load_data  # noqa: E402
from kestrel.logs import configure_console  # noqa: E402
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
    print(json.dumps({
        "per_run_overhead_ms": round(over, 2),
        "speedup_2_jobs": round(serial / two, 3),
        "machine_speedup_2_procs": round(machine, 3),
        "dask_vs_local_ratio": None if dask is None else round(dask / two, 3),
        "runs": len(specs40),
        "serial_s": round(serial, 3),
        "two_jobs_s": round(two, 3),
        "dask_s": None if dask is None else round(dask, 3),
    }))


if __name__ == "__main__":
    main()
