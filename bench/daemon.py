"""Benchmark the daemon (`kestrel daemon` as a real subprocess, driven over its socket).

Prints one JSON line:
- `day_seconds_daemon`: submit -> done of the sample day (baseline agent, OPEN + 2 checkpoints,
  pace max) through the socket (`submit`, then `wait`): the run's flags, every turn, ledger
  event and evidence record, and its final ledger and capture committed to SQLite (WAL,
  synchronous=FULL: an fsync per commit, at least two: the submit's and the end's);
- `day_seconds_inprocess`: `kestrel simulate` with the same flags in this process
  (`kestrel.cli.main`, the reference measured in the same run) writing the same durable
  results: `--capture` (appended turn by turn while the run goes, then replaced atomically
  with an fsync) and `--ledger` (written atomically with an fsync), `--json` to a discarded
  stdout; `daemon_vs_inprocess_ratio` = daemon / that (target <= 1.5). Best of N interleaved;
  the exported ledger and capture are asserted equal to the in-process files;
- `day_seconds_inprocess_nofiles` and `daemon_vs_inprocess_nofiles_ratio`: the same against
  `kestrel simulate --json` that writes nothing (no fsync at all), for comparison;
- `concurrent_runs`: runs submitted at once (50 sample days, two configurations) that
  completed with exactly the ledger of their configuration (target >= 50), and
  `concurrent_seconds` for all of them;
- `lost_after_kill9`: acknowledged turns and ledger events (streamed to `follow` clients)
  missing from the final ledgers after rounds of kill -9 at random points and restarts during
  paced runs (must be 0); `kill9_rounds`, `acknowledged`;
- `commit_us_per_turn`: one terminal turn committed on its own (one transaction, fsync
  included) in the store, mean over 200 (the daemon groups concurrent commits, so this is the
  upper bound of what a turn costs).
Usage: python bench/daemon.py [--quick] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

from kestrel.service.daemon.store import Insert, NewRun, Store  # noqa: E402
from kestrel.cli import main as kestrel_main  # noqa: E402
from kestrel.cli.ctl import Client, NoDaemon  # noqa: E402
from kestrel.service.daemon.protocol import RunParams, SubmitParams, WaitParams  # noqa: E402

DAY = ["--checkpoints", "11:00,13:30"]
OTHER = ["--agent", "fixed:examples/orb_breakout.kes", "--checkpoints", "11:00"]


class Daemon:
    def __init__(self, home: Path, backend: str) -> None:
        self.home, self.backend = home, backend
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kestrel", "daemon", "--home", str(self.home), "--backend", self.backend],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with Client(self.home / "kestrel.sock", timeout=5):
                    return
            except (NoDaemon, OSError):
                time.sleep(0.02)
        raise RuntimeError("the daemon did not start")

    def client(self) -> Client:
        return Client(self.home / "kestrel.sock")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


def submit(c: Client, flags: list[str]) -> str:
    run: str = c.call("submit", SubmitParams(flags, str(ROOT)))["run"]
    return run


def day_figures(d: Daemon, repeats: int, out: Path) -> dict[str, float]:
    ledger, capture = out / "day.ledger", out / "day.capture"
    durable = ["simulate", *DAY, "--json", "--ledger", str(ledger), "--capture", str(capture)]
    best_d = best_i = best_n = float("inf")
    with d.client() as c:
        for _ in range(repeats):
            t = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                assert kestrel_main(durable) == 0
            best_i = min(best_i, time.perf_counter() - t)
            t = time.perf_counter()
            run = submit(c, DAY)
            info = c.call("wait", WaitParams(run, 120))
            best_d = min(best_d, time.perf_counter() - t)
            assert info["state"] == "done", info
            exported = c.call("export", RunParams(run))
            assert exported["ledger"].encode() == ledger.read_bytes()
            assert exported["capture"].encode() == capture.read_bytes()
            t = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                assert kestrel_main(["simulate", *DAY, "--json"]) == 0
            best_n = min(best_n, time.perf_counter() - t)
    return {"day_seconds_daemon": round(best_d, 4), "day_seconds_inprocess": round(best_i, 4),
            "daemon_vs_inprocess_ratio": round(best_d / best_i, 3),
            "day_seconds_inprocess_nofiles": round(best_n, 4),
            "daemon_vs_inprocess_nofiles_ratio": round(best_d / best_n, 3)}


def concurrent(d: Daemon, n: int) -> dict[str, float]:
    with d.client() as c:
        first = submit(c, DAY), submit(c, OTHER)
        expected = [c.call("export", RunParams(r))["ledger"] for r in first if c.call("wait", WaitParams(r, 120))]
        t = time.perf_counter()
        runs = [(submit(c, DAY if i % 2 == 0 else OTHER), i % 2) for i in range(n)]
        ok = 0
        for run, kind in runs:
            info = c.call("wait", WaitParams(run, 600))
            ok += info["state"] == "done" and c.call("export", RunParams(run))["ledger"] == expected[kind]
        seconds = time.perf_counter() - t
    return {"concurrent_runs": ok, "concurrent_submitted": n, "concurrent_seconds": round(seconds, 3)}


def kill9(d: Daemon, rounds: int, rng: random.Random) -> dict[str, int]:
    acked: dict[tuple[str, str, str], Any] = {}

    def follow(run: str) -> None:
        def seen(item: dict[str, Any]) -> None:
            acked[(run, item["kind"], item["key"])] = item["body"]

        try:
            with Client(d.home / "kestrel.sock") as c:
                c.call("follow", RunParams(run), on_event=seen)
        except Exception:
            pass  # killed under us: what was streamed is acknowledged

    with d.client() as c:
        runs = [submit(c, [*(DAY if i % 2 == 0 else OTHER), "--pace", "4000"]) for i in range(4)]
    for _ in range(rounds):
        threads = [threading.Thread(target=follow, args=(r,), daemon=True) for r in runs]
        for th in threads:
            th.start()
        time.sleep(rng.uniform(0.3, 1.5))
        d.kill9()
        for th in threads:
            th.join(10)
        d.start()
    lost = 0
    with d.client() as c:
        for run in runs:
            assert c.call("wait", WaitParams(run, 300))["state"] == "done"
            out = c.call("export", RunParams(run))
            lines = out["ledger"].splitlines()
            turns = [json.loads(x) for x in out["capture"].splitlines()[1:]]
            for (r, kind, key), body in acked.items():
                if r != run:
                    continue
                if kind == "ledger":
                    i = int(key.split("/")[1])
                    lost += i >= len(lines) or json.loads(lines[i]) != body
                elif kind == "turn":
                    lost += body not in turns
    return {"lost_after_kill9": lost, "kill9_rounds": rounds, "acknowledged": len(acked)}


def commit_cost(home: Path, n: int = 200) -> float:
    store = Store(home / "bench.db")
    store.write([NewRun("b", b"{}", b"[]", "max")])
    body = b'{"record":"turn","date":"2024-04-15","ordinal":"OPEN","turn":{"kind":"pass"},"agent":"baseline"}'
    t = time.perf_counter()
    for i in range(n):
        store.write([Insert("b", "turn", f"2024-04-15/{i}", body)])
    cost = (time.perf_counter() - t) / n * 1e6
    store.close()
    return round(cost, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = p.parse_args()
    rng = random.Random(2026)
    with tempfile.TemporaryDirectory(prefix="kbench-") as tmp:
        d = Daemon(Path(tmp) / "home", args.backend)
        d.start()
        try:
            out: dict[str, Any] = {"backend": args.backend}
            out.update(day_figures(d, 5 if args.quick else 9, Path(tmp)))
            out.update(concurrent(d, 50 if args.quick else 80))
            out.update(kill9(d, 2 if args.quick else 5, rng))
            out["commit_us_per_turn"] = commit_cost(Path(tmp))
        finally:
            d.stop()
    os.environ.pop("_", None)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
