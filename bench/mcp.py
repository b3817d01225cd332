"""Benchmark the MCP server: a `session_submit` round trip and a whole day driven through MCP.

Prints one JSON line:
- `submit_roundtrip_us_median`: one `session_submit` of PASS through the SDK's in-process
  `Client` (mode auto), from the call to the next request: the JSON schema validation of the
  arguments and the result, the host, the session's actors, the engine running the ticks to
  the next checkpoint and the next briefing. Median over the checkpoints of a session with a
  checkpoint every 10 minutes;
- `day_cpu_seconds_mcp`: the sample day (OPEN + 2 checkpoints) authored by an MCP client
  (`session_start`, then a PLAN, PASS, PASS through `session_submit`) to done, in process CPU
  time (everything runs in this process: host, sessions, server and client);
- `day_cpu_seconds_direct`: the same turns through `run_session` (a scripted agent sending the
  same replies with the same usage; the reference measured in the same run);
  `mcp_vs_direct_day_ratio` = mcp / direct CPU time (target <= 3). CPU time, because on the
  shared machine the wall clock mostly measures the other processes; the wall-clock figures
  (`day_seconds_*`, `mcp_vs_direct_day_ratio_wall`) are printed too. The ledgers are asserted
  equal.
Day figures are the best of N interleaved runs; `--quick` runs fewer. `backend` is the anyio
backend of the server and client (`--backend trio` to measure trio).
Usage: python bench/mcp.py [--quick] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# this file is named like the `mcp` package: take its folder off the path, put the repo on it
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402
from kestrel.agents.scripted import ScriptedAgent  # noqa: E402
from kestrel.data import load_sample  # noqa: E402
from kestrel.logs import configure_console  # noqa: E402
from kestrel.session.protocol import Usage  # noqa: E402
from kestrel.session.runner import SessionOptions, run_session  # noqa: E402

PLAN = (
    "PLAN orb UNTIL 15:45 RISK maxpos 200 maxloss 400\n"
    "WHEN time >= 10:00 AND last > high(30m) AND spread < 0.05: "
    "BUY 100 LMT ask+0.02 STOP -0.6% TARGET +1.2% TTL 20m\n"
    "WHEN time >= 10:00 AND last < low(30m): SELL 100 MKT STOP +0.6% TARGET -1.2%\n"
)
CHECKS = ("11:00", "13:30")
REPLIES = (PLAN, "PASS", "PASS")
USAGE = Usage(input=1000, output=50)
EVERY_10_MIN = tuple(f"{h:02d}:{m:02d}" for h in range(9, 16) for m in range(0, 60, 10) if (h, m) > (9, 30))


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"{tool} failed: {result.content}")
    content: dict[str, Any] = result.structured_content
    return content


async def day_through_mcp(client: Client) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, ledger) of one day authored through MCP."""
    t0, c0 = time.perf_counter(), time.process_time()
    step = await call(client, "session_start", checkpoints=list(CHECKS))
    sid = step["session_id"]
    for reply in REPLIES:
        step = await call(client, "session_submit", session_id=sid, reply=reply,
                          input_tokens=USAGE.input, output_tokens=USAGE.output)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert step["done"], step
    ledger = (await call(client, "session_result", session_id=sid))["ledger"]
    await call(client, "session_close", session_id=sid)
    return elapsed, cpu, ledger


def day_direct() -> tuple[float, float, bytes]:
    agent = ScriptedAgent(list(REPLIES), usage=USAGE)
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_session(load_sample(), agent, SessionOptions(checkpoints=CHECKS))
    return time.perf_counter() - t0, time.process_time() - c0, result.ledger_jsonl()


async def submit_roundtrips(client: Client) -> list[float]:
    step = await call(client, "session_start", checkpoints=list(EVERY_10_MIN))
    sid = step["session_id"]
    step = await call(client, "session_submit", session_id=sid, reply=PLAN)
    times: list[float] = []
    while not step["done"]:
        t0 = time.perf_counter()
        step = await call(client, "session_submit", session_id=sid, reply="PASS")
        times.append(time.perf_counter() - t0)
    await call(client, "session_close", session_id=sid)
    return times[:-1]  # the last PASS runs the session's tail to the close


async def measure(runs: int) -> dict[str, Any]:
    async with open_host() as host, Client(build_server(host)) as client:
        await day_through_mcp(client)  # warm up (imports, compiled plans, caches)
        day_direct()
        mcp_s: list[tuple[float, float]] = []
        direct_s: list[tuple[float, float]] = []
        for _ in range(runs):
            t, c, ledger = await day_through_mcp(client)
            mcp_s.append((t, c))
            d, dc, expected = day_direct()
            direct_s.append((d, dc))
            assert ledger.encode() == expected, "the MCP day's ledger differs from run_session's"
        trips = await submit_roundtrips(client)
    wall_mcp, wall_direct = min(t for t, _ in mcp_s), min(t for t, _ in direct_s)
    cpu_mcp, cpu_direct = min(c for _, c in mcp_s), min(c for _, c in direct_s)
    return {
        "submit_roundtrip_us_median": round(statistics.median(trips) * 1e6, 1),
        "submit_samples": len(trips),
        "day_cpu_seconds_mcp": round(cpu_mcp, 5),
        "day_cpu_seconds_direct": round(cpu_direct, 5),
        "mcp_vs_direct_day_ratio": round(cpu_mcp / cpu_direct, 3),
        "day_seconds_mcp": round(wall_mcp, 5),
        "day_seconds_direct": round(wall_direct, 5),
        "mcp_vs_direct_day_ratio_wall": round(wall_mcp / wall_direct, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args()
    configure_console(level="error")
    figures = anyio.run(measure, 5 if args.quick else 15, backend=args.backend)
    print(json.dumps({"bench": "mcp", "backend": args.backend, **figures, "quick": args.quick}))


if __name__ == "__main__":
    main()
