"""Security: the work one MCP call may ask for (observation 5, in process). Caps on iterations,
token budgets, days and checkpoints are the server's; a session's log keeps a bounded amount
of text; a client may hold a bounded number of open sessions; a document's length is checked
before any processing; a session whose call ran over its wall clock is closed."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.service.host import HostClient, open_host  # noqa: E402
from kestrel.service.host.events import EvidenceEvent, RequestEvent  # noqa: E402
from kestrel.service.host.host import DROPPED  # noqa: E402
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402
from security_support import CHECKPOINTS, HEAVY_PLAN, call, refusal  # noqa: E402

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(limits: ServiceLimits = DEFAULT_LIMITS) -> AsyncIterator[tuple[Client, HostClient]]:
    async with open_host(limits=limits) as h:
        async with Client(build_server(h, limits=limits), mode="legacy") as c:
            yield c, h


@pytest.mark.parametrize(("args", "says"), [
    ({"max_iterations": 10**30}, "max_iterations must be 1 to 16"),
    ({"token_budget": 10**30}, "token_budget must be 1 to 200,000"),
    ({"days": 10**6}, "days must be 1 to 31"),
    ({"checkpoints": ",".join(f"{h:02d}:{m:02d}" for h in range(10, 16) for m in range(0, 60, 6))},
     "60 checkpoints: at most 48"),
])
async def test_the_server_caps_what_a_session_may_run(anyio_backend: str, args: dict[str, Any], says: str) -> None:
    async with connect() as (c, _):
        text = await refusal(c, "session_start", **args)
        assert says in text and len(text) < 300, text
        if "max_iterations" not in args and "token_budget" not in args:
            assert says in await refusal(c, "simulate", plan="PLAN p\nWHEN last > 0: BUY 1 MKT", **args)


async def test_a_sessions_log_keeps_a_bounded_amount_of_text(anyio_backend: str) -> None:
    """Observation 5: each VIEW kept ~9 KB in the session log, without end."""
    limits = msgspec.structs.replace(DEFAULT_LIMITS, max_log_bytes=60_000)
    async with connect(limits) as (c, h):
        start = await call(c, "session_start", checkpoints=CHECKPOINTS, max_iterations=16, days=2)
        sid, step = start["session_id"], start
        views = 0
        while not step["done"]:
            req = step["request"]
            reply = "VIEW v: quote, bars(1m, 60), tape BUDGET 4000" if req["budget_left"]["iterations"] else "PASS"
            views += reply.startswith("VIEW")
            step = await call(c, "session_submit", session_id=sid, reply=reply)
        kept = 0
        async for event in h.follow(sid, owner="stdio"):
            texts: list[str | None] = []
            if isinstance(event, RequestEvent):
                texts = [event.request.briefing, event.request.repair_error]
            elif isinstance(event, EvidenceEvent):
                texts = [event.record.text, event.record.view]
            kept += sum(len(t) for t in texts if t and t != DROPPED)
    assert views > 300  # unbounded, their briefings alone would be megabytes
    assert kept <= limits.max_log_bytes + 20_000  # the budget and the newest entries


async def test_a_client_holds_a_bounded_number_of_open_sessions(anyio_backend: str) -> None:
    async with connect() as (c, _):
        ids = [(await call(c, "session_start"))["session_id"] for _ in range(DEFAULT_LIMITS.max_sessions_per_client)]
        text = await refusal(c, "session_start")
        assert "sessions open, the most one client may" in text
        await call(c, "session_close", session_id=ids[0])
        assert (await call(c, "session_start"))["done"] is False


async def test_a_document_is_measured_before_any_processing(anyio_backend: str) -> None:
    """Observation 8: check/format split the whole input first (~0.2 s per MB)."""
    huge = "PASS\n" + "# comment line\n" * 400_000  # ~6 MB
    async with connect() as (c, _):
        for tool in ("check", "format"):
            await call(c, tool, source="PASS")  # the first call of a process warms up: not timed
            started = time.monotonic()
            got = await call(c, tool, source=huge)
            assert time.monotonic() - started < 1.0
            assert got["valid"] is False and got["diagnostics"][0]["code"] == "too-large"
        for tool, args in (("simulate", {"plan": huge}), ("view", {"view": huge, "at": "10:30"})):
            assert "the limit is 20,000" in await refusal(c, tool, **args)
        assert "over the 200000 limit" in await refusal(c, "session_submit", session_id="s" + "0" * 32,
                                                        reply="x" * 200_001)


async def test_a_call_over_its_cpu_frees_its_worker(anyio_backend: str) -> None:
    limits = msgspec.structs.replace(DEFAULT_LIMITS, call_cpu_seconds=0.2)
    async with open_host() as h:
        async with Client(build_server(h), mode="legacy") as roomy, \
                Client(build_server(h, limits=limits), mode="legacy") as c:
            text = await refusal(c, "simulate", plan=HEAVY_PLAN, days=6, checkpoints=CHECKPOINTS)
            assert "used its 0.2 s of CPU time" in text
            assert h.compute.busy == 0  # its worker is free again
            assert (await call(roomy, "simulate", plan="PLAN p RISK maxpos 1 maxloss 10\nWHEN last > 0: BUY 1 MKT"))


async def test_a_session_whose_call_ran_over_its_wall_clock_is_closed(anyio_backend: str) -> None:
    """A reply whose work (the engine running a day of 32 rules) outlasts the call's wall clock:
    the call is stopped and its session closed, not left running for a caller who gave up."""
    tight = msgspec.structs.replace(DEFAULT_LIMITS, call_seconds=0.02)
    async with open_host() as h:
        async with Client(build_server(h), mode="legacy") as roomy, \
                Client(build_server(h, limits=tight), mode="legacy") as hurried:
            sid = (await call(roomy, "session_start", days=3))["session_id"]
            text = await refusal(hurried, "session_submit", session_id=sid, reply=HEAVY_PLAN)
            assert "ran over its 0.02 s of wall clock" in text
            assert "unknown session" in await refusal(roomy, "session_status", session_id=sid)
