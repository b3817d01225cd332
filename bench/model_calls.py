"""Benchmark model calls at scale: a model-bound sweep against a rate-limited loopback provider.

The bench's own provider (stdlib `http.server` on 127.0.0.1, Chat Completions) answers every
request after `LATENCY_S` (300 ms) and admits at most `RPS` (20) requests in any one-second
window; beyond that it answers 429 with `Retry-After` (whole seconds) and `retry-after-ms`. It
records every request, so calls lost and calls made twice are counted by the server, not by
the client. The model always answers with a plan.

The sweep: `kestrel sweep` with one model agent (`openai:gpt-4o@URL|key=none|rpm=RPM`, the
client-side limit just under the server's) on the sample, `DAYS` sessions x `REPEATS`
repeats, each run OPEN and 3 checkpoints: `TURNS` = 400 model turns, at most
`--max-concurrency 10` runs in flight (`CONCURRENCY`). The bound is the limit's: 400 / 20 = 20 s.

Prints one JSON line:
- `wall_s_{direct,asyncio,trio}`: the sweep's wall time on each backend of the model runs
  (run_session on threads; the actor shell on one asyncio or trio loop);
  `vs_bound_{...}`: that over the 20 s bound (target <= 1.15);
- `calls_lost_{...}`: turns that did not get the model's plan (a call that finally failed, or a
  turn missing), target 0; `calls_duplicated_{...}`: requests answered 200 twice for the same
  body, target 0; `rate_limited_{...}`: requests the server answered 429 (retried, not lost);
- `cpu_ms_per_call_{...}`: the process's CPU time over the sweep per model call, and
  `cpu_s_{...}` in all (the machine may be shared: a sweep that gets less than
  `cpu_s / bound_s` of a core cannot meet the bound whatever its pacing);
- `calls_rps_{...}`: the answered requests over the span from the first to the last, against
  `client_rps` (the client-side limit, `client_bound_s` = turns / client_rps the shortest the
  sweep can take);
- `cached_rerun_calls`: requests a rerun (same grid, a fresh directory, the same
  `--reply-cache`) made, target 0; `cached_rerun_ledgers_identical`: every run's ledger is byte
  for byte the first run's;
- `reference_rps`: the limit (20), for reading the figures.
`--quick` runs 80 turns (bound 4 s) on asyncio and direct only, and the cached rerun.
Usage: python bench/model_calls.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.cli import main  # noqa: E402

LATENCY_S = 0.3
RPS = 20
CLIENT_RPM = 1140  # 19 per second: the client keeps just under the provider's 20 (room for network jitter)
CONCURRENCY = 10  # model runs in flight: 19 rps x (0.3 s latency + a run's work between calls) needs about 8
CHECKPOINTS = "11:00,13:30,15:00"  # with OPEN: 4 turns per run
PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"


class Provider:
    """The bench's loopback provider (see the module docstring)."""

    def __init__(self, latency: float, rps: int) -> None:
        self.latency = latency
        self.rps = rps
        self.lock = threading.Lock()
        self.window: deque[float] = deque()
        self.statuses: Counter[int] = Counter()
        self.answered: Counter[str] = Counter()
        self.arrivals: list[float] = []  # wall-clock times of the answered requests
        self.port = 0

    def admit(self, now: float) -> float | None:
        with self.lock:
            while self.window and self.window[0] <= now - 1.0:
                self.window.popleft()
            if len(self.window) < self.rps:
                self.window.append(now)
                return None
            return self.window[0] + 1.0 - now

    def requests(self) -> int:
        with self.lock:
            return sum(self.statuses.values())

    def duplicated(self) -> int:
        with self.lock:
            return sum(n - 1 for n in self.answered.values())

    def reset(self) -> None:
        with self.lock:
            self.statuses.clear()
            self.answered.clear()
            self.arrivals.clear()


def serve_forever(latency: float = LATENCY_S, rps: int = RPS) -> None:
    """The provider in this process until stdin closes (the bench runs it as a child process,
    so its work never competes with the sweep's for the interpreter)."""
    with provider(latency, rps) as p:
        print(p.port, flush=True)
        sys.stdin.read()


class Remote:
    """The provider in a child process: its port, and its counts read over HTTP (`GET /stats`)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/reset", method="POST"),
                               timeout=10).read()


@contextlib.contextmanager
def serve() -> Iterator[Remote]:
    import subprocess

    child = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None
        yield Remote(int(child.stdout.readline()))
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


@contextlib.contextmanager
def provider(latency: float = LATENCY_S, rps: int = RPS) -> Iterator[Provider]:
    p = Provider(latency, rps)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:  # /stats
            with p.lock:
                doc = {"statuses": {str(k): v for k, v in p.statuses.items()},
                       "duplicated": sum(n - 1 for n in p.answered.values()),
                       "first": min(p.arrivals, default=None), "last": max(p.arrivals, default=None)}
            self._send(200, json.dumps(doc).encode(), {})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/reset":
                p.reset()
                self._send(200, b"{}", {})
                return
            wait = p.admit(time.monotonic())
            if wait is not None:
                with p.lock:
                    p.statuses[429] += 1
                self._send(429, b'{"error":{"type":"rate_limit_error","message":"slow down"}}',
                           {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": f"{wait * 1000:.0f}"})
                return
            time.sleep(p.latency)
            body = json.loads(raw or b"{}")
            with p.lock:
                p.statuses[200] += 1
                p.arrivals.append(time.time() - p.latency)
                p.answered[hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()] += 1
            prompt = len(json.dumps(body.get("messages", []))) // 4
            answer = {"id": "bench", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": PLAN}}],
                      "usage": {"prompt_tokens": prompt, "completion_tokens": len(PLAN) // 4,
                                "total_tokens": prompt + len(PLAN) // 4}}
            self._send(200, json.dumps(answer).encode(), {})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.request_queue_size = 128
    p.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield p
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def sweep(p: Remote, out: Path, *, days: int, repeats: int, backend: str, cache: Path | None = None) -> dict[str, Any]:
    agent = f"openai:gpt-4o@http://127.0.0.1:{p.port}/v1|key=none|rpm={CLIENT_RPM}"
    argv = ["sweep", "--agents", agent, "--days", str(days), "--repeats", str(repeats), "--checkpoints",
            CHECKPOINTS, "--out", str(out), "--jobs", "1", "--backend", backend, "--max-concurrency", str(CONCURRENCY), "--json"]
    if cache is not None:
        argv += ["--reply-cache", str(cache)]
    buf = io.StringIO()
    t, c = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    doc = json.loads(buf.getvalue())
    lost = 0
    for r in doc["runs"]:
        run = out / "runs" / str(r["key"])
        if r.get("error") or not run.is_dir():
            lost += 4
            continue
        for line in (run / "capture.jsonl").read_text().splitlines()[1:]:
            turn = json.loads(line)["turn"]
            lost += "plan" not in turn  # a stand-down in place of the model's plan: the call was lost
    return {"code": code, "wall": wall, "cpu": cpu, "lost": lost, "runs": doc["runs"]}


def ledgers(out: Path) -> dict[str, bytes]:
    return {d.name: (d / "ledger.jsonl").read_bytes() for d in (out / "runs").iterdir() if not d.name.startswith(".")}


def main_bench(quick: bool) -> dict[str, Any]:
    days, repeats = (5, 4) if quick else (5, 20)
    turns = days * repeats * 4
    bound = turns / RPS
    fig: dict[str, Any] = {"turns": turns, "bound_s": bound, "reference_rps": RPS, "latency_s": LATENCY_S,
                           "client_rps": CLIENT_RPM / 60, "client_bound_s": round(turns * 60 / CLIENT_RPM, 2)}
    backends = ("direct", "asyncio") if quick else ("direct", "asyncio", "trio")
    with serve() as p, tempfile.TemporaryDirectory() as tmp:
        warm = sweep(p, Path(tmp) / "warm", days=1, repeats=1, backend="direct")  # imports, SDK client, data
        assert warm["lost"] == 0, warm
        for backend in backends:
            time.sleep(1.1)  # an empty window: every backend starts at the full limit
            p.reset()
            r = sweep(p, Path(tmp) / backend, days=days, repeats=repeats, backend=backend)
            st = p.stats()
            calls = st["statuses"].get("200", 0)
            fig[f"wall_s_{backend}"] = round(r["wall"], 2)
            fig[f"vs_bound_{backend}"] = round(r["wall"] / bound, 3)
            fig[f"calls_lost_{backend}"] = r["lost"]
            fig[f"calls_duplicated_{backend}"] = st["duplicated"]
            fig[f"rate_limited_{backend}"] = st["statuses"].get("429", 0)
            fig[f"cpu_ms_per_call_{backend}"] = round(r["cpu"] * 1000 / max(calls, 1), 2)
            fig[f"cpu_s_{backend}"] = round(r["cpu"], 2)
            span = (st["last"] or 0.0) - (st["first"] or 0.0)
            fig[f"calls_rps_{backend}"] = round((calls - 1) / span, 2) if span > 0 else None
            fig[f"exit_{backend}"] = r["code"]
        cache = Path(tmp) / "cache"
        time.sleep(1.1)
        first = sweep(p, Path(tmp) / "first", days=days, repeats=min(repeats, 5), backend="direct", cache=cache)
        p.reset()
        second = sweep(p, Path(tmp) / "second", days=days, repeats=min(repeats, 5), backend="direct", cache=cache)
        fig["cached_rerun_calls"] = sum(p.stats()["statuses"].values())
        fig["cached_rerun_ledgers_identical"] = (ledgers(Path(tmp) / "first") == ledgers(Path(tmp) / "second")
                                                 and first["lost"] == second["lost"] == 0)
        fig["cached_rerun_wall_s"] = round(second["wall"], 2)
    return fig


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="80 turns, two backends")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the provider (a child process)
    args = ap.parse_args()
    if args.serve:
        serve_forever()
    else:
        print(json.dumps(main_bench(args.quick), sort_keys=True))
