"""The MCP server in process, through the official SDK's `Client` in both connection modes
(`auto`, and `legacy`, which runs real JSON-RPC framing), on asyncio and trio: tools with
output schemas, resources, the prompt, a whole session authored by the client (a view request,
a repair, a plan) with the fixed agent's ledger and a replayable capture, bad input for every
tool, concurrent sessions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import MAX_REPLY_CHARS, build_server  # noqa: E402
from kestrel.cli import main as cli  # noqa: E402
from kestrel.models.card import language_card  # noqa: E402

pytestmark = pytest.mark.anyio

MODES = ("auto", "legacy")
ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
TOOLS = {
    "check", "format", "panes", "view", "simulate", "session_start", "session_submit",
    "session_status", "session_result", "session_close",
}


@asynccontextmanager
async def connect(mode: str, roots: list[Path] | None = None, **host: Any) -> AsyncIterator[Client]:
    async with open_host(**host) as h:
        served = DataRoots.of([str(r) for r in roots or []])
        async with Client(build_server(h, roots=served), mode=mode) as client:
            yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def fails(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return str(text)


async def reason(client: Client, tool: str, **args: Any) -> str:
    """The tool error's own text (after the SDK's `Error executing tool NAME: `)."""
    text = await fails(client, tool, **args)
    prefix = f"Error executing tool {tool}: "
    assert text.startswith(prefix), text
    return text[len(prefix):]


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert cli(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("mode", MODES)
async def test_tools_resources_and_prompt(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        tools = (await c.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        assert all(t.output_schema is not None and t.output_schema["type"] == "object" for t in tools)
        card = (await c.read_resource("kestrel://language")).contents[0]
        assert card.text == language_card()  # type: ignore[union-attr]
        panes = json.loads((await c.read_resource("kestrel://panes")).contents[0].text)  # type: ignore[union-attr]
        assert panes == await call(c, "panes")
        names = json.loads((await c.read_resource("kestrel://examples")).contents[0].text)  # type: ignore[union-attr]
        assert "orb_breakout" in names
        text = (await c.read_resource("kestrel://examples/orb_breakout")).contents[0].text  # type: ignore[union-attr]
        assert text == Path("examples/orb_breakout.kes").read_text()
        with pytest.raises(Exception, match="no example named 'nope'"):
            await c.read_resource("kestrel://examples/nope")
        prompt = await c.get_prompt("author_plan", {"goal": "trade the opening range"})
        body = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert body.startswith(language_card()) and "trade the opening range" in body


@pytest.mark.parametrize("mode", MODES)
async def test_documents_panes_and_views(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        ok = await call(c, "check", source=ORB)
        assert ok == {"valid": True, "diagnostics": [], "canonical": ORB}
        bad = await call(c, "check", source="PLAN x\nWHEN last > hihg(30m): BUY 100 MKT STOP -0.5%")
        assert bad["valid"] is False and "canonical" not in bad
        d = bad["diagnostics"][0]
        assert (d["line"], d["col"], d["code"]) == (2, 13, "unknown-name") and "high" in d["hint"]
        messy = "PLAN   orb\nWHEN last>high(30m):BUY 100 MKT STOP -0.5%"
        formatted = await call(c, "format", source=messy)
        assert formatted["valid"] and formatted["text"].startswith("PLAN orb\nWHEN last > high(30m): BUY 100")
        assert (await call(c, "format", source="PLAN"))["valid"] is False
        catalog = await call(c, "panes")
        assert {p["name"] for p in catalog["panes"]} >= {"quote", "bars", "levels", "stats", "tape"}
        assert "clock" in catalog["kernel_ids"] and catalog["budget"]["min"] < catalog["budget"]["max"]
        view = await call(c, "view", view="VIEW v: quote, bars(5m, 3) BUDGET 600", at="10:30")
        assert view["panes"] == ["quote", "bars"] and view["budget"] == 600
        assert view["cutoff"] == "10:25:00" and view["text"].startswith("QUOTE")
        assert 0 < view["tokens"] <= 600


async def test_simulate_gives_the_cli_summary(anyio_backend: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "orb.kes"
    plan.write_text(ORB)
    expected = cli_json(capsys, "simulate", "--agent", f"fixed:{plan}", "--checkpoints", "11:00,13:30",
                        "--days", "2", "--json", "--backend", "direct")
    for mode in MODES:
        async with connect(mode) as c:
            got = await call(c, "simulate", plan=ORB, checkpoints="11:00,13:30", days=2)
            assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)  # ints stay ints
            assert isinstance(got["total"]["fills"], int) and isinstance(got["days"][0]["fills"], int)
            again = await call(c, "simulate", plan=ORB, checkpoints=["11:00", "13:30"], days=2)
            assert again == expected


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_authored_session_is_the_fixed_agents_run(
    anyio_backend: str, mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "orb.kes"
    plan.write_text(ORB)
    fixed_ledger = tmp_path / "fixed.jsonl"
    fixed = cli_json(capsys, "simulate", "--agent", f"fixed:{plan}", "--checkpoints", "11:00",
                     "--ledger", str(fixed_ledger), "--json", "--backend", "direct")
    async with connect(mode) as c:
        start = await call(c, "session_start", checkpoints="11:00")
        sid = start["session_id"]
        req = start["request"]
        assert (req["ordinal"], req["iteration"], req["repair_error"]) == ("OPEN", 0, None)
        assert req["budget_left"]["iterations"] == 3 and "CLOCK" in req["briefing"]
        step = await call(c, "session_submit", session_id=sid, reply="VIEW deep: quote, stats BUDGET 500")
        assert step["request"]["view_name"] == "deep" and step["request"]["iteration"] == 1
        assert "STATS" in step["request"]["briefing"]
        step = await call(c, "session_submit", session_id=sid, reply="PLAN orb\nWHEN last > hihg(30m): BUY 1 MKT")
        assert "did you mean `high`" in step["request"]["repair_error"]
        assert step["request"]["view_name"] == "deep"  # a repair keeps the last view
        status = await call(c, "session_status", session_id=sid)
        assert status["state"] == "waiting" and status["turns"] == 0
        assert status["request"] == step["request"]
        step = await call(c, "session_submit", session_id=sid, reply=ORB, input_tokens=900, output_tokens=40)
        assert step["request"]["ordinal"] == "11:00" and step["request"]["iteration"] == 0
        done = await call(c, "session_submit", session_id=sid, reply="PASS")
        assert done["done"] is True and done["summary"]["days"][0]["turns"][0]["turn"] == "PLAN orb"
        assert done["summary"]["total"] == fixed["total"]
        result = await call(c, "session_result", session_id=sid)
        assert result["summary"] == done["summary"]
        assert (await call(c, "session_status", session_id=sid))["state"] == "done"
        closed = await call(c, "session_close", session_id=sid)
        assert closed == {"session_id": sid, "closed": True, "state": "done"}
    assert result["ledger"].encode() == fixed_ledger.read_bytes()
    capture = tmp_path / "mcp.capture.jsonl"
    capture.write_text(result["capture"])
    assert cli(["replay", str(capture), "--expect-ledger", str(fixed_ledger), "--backend", "direct", "--json"]) == 0
    evidence = done["summary"]["evidence"]
    assert evidence == {"repair": 1, "view-request": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_bad_input_for_every_tool(anyio_backend: str, mode: str, tmp_path: Path) -> None:
    async with connect(mode, roots=[tmp_path]) as c:
        # wrong argument types and missing arguments, for every tool
        bad_calls: list[tuple[str, dict[str, Any]]] = [
            ("check", {"source": 3}), ("check", {}), ("format", {"source": ["PLAN"]}),
            ("view", {"view": "VIEW v: quote"}), ("simulate", {"plan": 1}),
            ("session_start", {"days": "many"}), ("session_submit", {"session_id": "x"}),
            ("session_status", {}), ("session_result", {"session_id": 7}), ("session_close", {}),
        ]
        for tool, args in bad_calls:
            text = await fails(c, tool, **args)
            assert "\n" not in text and "argument" in text, text  # one line naming the argument
        assert "Unknown tool" in await fails(c, "trade", plan=ORB)
        # view: unknown pane, reserved kernel pane, bad time, data that does not exist
        assert "unknown pane" in await fails(c, "view", view="VIEW v: quotes", at="10:30")
        assert "clock" in await fails(c, "view", view="VIEW v: clock", at="10:30")
        assert "hh:mm" in await fails(c, "view", view="VIEW v: quote", at="25:99")
        assert "expected one VIEW" in await fails(c, "view", view="PASS", at="10:30")
        assert "no such file" in await fails(c, "view", view="VIEW v: quote", at="10:30", data="no/such.csv")
        assert "outside this server's data roots" in await fails(c, "view", view="VIEW v: quote", at="10:30",
                                                                 data="/no/such.csv")
        # simulate: invalid plan, unknown date, bad days and checkpoints, missing data
        assert "hihg" in await fails(c, "simulate", plan="PLAN x\nWHEN last > hihg(30m): BUY 1 MKT")
        assert "no session on 2001-01-01" in await fails(c, "simulate", plan=ORB, date="2001-01-01")
        assert "days must be" in await fails(c, "simulate", plan=ORB, days=0)
        assert "25:00" in await fails(c, "simulate", plan=ORB, checkpoints="25:00")
        assert "no such file" in await fails(c, "simulate", plan=ORB, data="missing.parquet")
        # session_start: unknown profile, effort, budgets, date format
        assert "turbo" in await fails(c, "session_start", profile="turbo")
        assert "effort" in await fails(c, "session_start", effort="max")
        assert "token_budget" in await fails(c, "session_start", token_budget=0)
        assert "max_iterations" in await fails(c, "session_start", max_iterations=-1)
        assert "YYYY-MM-DD" in await fails(c, "session_start", date="15/04/2024")
        # unknown, finished and closed session ids
        for tool in ("session_submit", "session_status", "session_result", "session_close"):
            args = {"session_id": "s0-nope"} | ({"reply": "PASS"} if tool == "session_submit" else {})
            assert "unknown session 's0-nope'" in await fails(c, tool, **args)
        start = await call(c, "session_start")
        sid = start["session_id"]
        assert "submit replies until" in await fails(c, "session_result", session_id=sid)
        assert "must be 0 to" in await fails(c, "session_submit", session_id=sid, reply="PASS", input_tokens=-1)
        huge = "PASS " + "x" * MAX_REPLY_CHARS
        assert "over the" in await fails(c, "session_submit", session_id=sid, reply=huge)
        # over the language's document limit: a repair in the loop, not a tool error
        long = await call(c, "session_submit", session_id=sid, reply="PLAN " + "x" * 30_000)
        assert "characters" in long["request"]["repair_error"] and long["request"]["iteration"] == 1
        done = await call(c, "session_submit", session_id=sid, reply="STANDDOWN \"no edge\"")
        assert done["done"] is True
        assert "not waiting" in await fails(c, "session_submit", session_id=sid, reply="PASS")
        await call(c, "session_close", session_id=sid)
        assert "unknown session" in await fails(c, "session_result", session_id=sid)
        # and the server still serves
        assert (await call(c, "check", source="PASS"))["valid"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_client_sessions(anyio_backend: str, mode: str) -> None:
    replies = {0: ORB, 1: "STANDDOWN \"spread\"", 2: "PASS", 3: ORB}
    summaries: dict[int, dict[str, Any]] = {}
    async with connect(mode) as c:

        async def one(k: int) -> None:
            start = await call(c, "session_start", checkpoints=["11:00"])
            sid = start["session_id"]
            step = await call(c, "session_submit", session_id=sid, reply=f"VIEW v{k}: quote")
            assert step["request"]["view_name"] == f"v{k}"
            step = await call(c, "session_submit", session_id=sid, reply=replies[k])
            while not step["done"]:
                step = await call(c, "session_submit", session_id=sid, reply="PASS")
            summaries[k] = step["summary"]

        async with anyio.create_task_group() as tg:
            for k in replies:
                tg.start_soon(one, k)
    assert summaries[0] == summaries[3]
    assert summaries[0]["days"][0]["turns"][0]["turn"] == "PLAN orb"
    assert summaries[1]["days"][0]["turns"][0]["turn"] == "STANDDOWN"
    assert summaries[2]["days"][0]["trades"] == 0


async def test_an_abandoned_client_session_stands_down(anyio_backend: str) -> None:
    async with connect("auto", abandon_after=0.2) as c:
        start = await call(c, "session_start", checkpoints="11:00")
        sid = start["session_id"]
        with anyio.fail_after(10):
            while (await call(c, "session_status", session_id=sid))["state"] != "done":
                await anyio.sleep(0.05)
        msg = await fails(c, "session_submit", session_id=sid, reply=ORB)
        assert "abandoned" in msg
        result = await call(c, "session_result", session_id=sid)
        assert [t["turn"] for t in result["summary"]["days"][0]["turns"]] == ["STANDDOWN", "STANDDOWN"]


FX = (
    "PLAN fx RISK maxpos 100000 maxloss 300\n"
    "WHEN last > high(30m): BUY 100000 MKT STOP -0.0010 TARGET +0.0020\n"
)


async def test_a_client_session_on_real_eurusd_quotes(
    anyio_backend: str, shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
    plan = tmp_path / "fx.kes"
    plan.write_text(FX)
    fixed_ledger = tmp_path / "fixed.jsonl"
    fixed = cli_json(capsys, "simulate", "--data", str(path), "--agent", f"fixed:{plan}", "--days", "2",
                     "--checkpoints", "12:00", "--ledger", str(fixed_ledger), "--json", "--backend", "direct")
    async with connect("legacy", roots=[shared_data]) as c:
        start = await call(c, "session_start", data=str(path), days=2, checkpoints="12:00")
        sid, step = start["session_id"], start
        replies = {("OPEN", 0): "VIEW v: quote, bars(15m, 8)", ("OPEN", 1): FX}
        while not step["done"]:
            req = step["request"]
            reply = replies.get((req["ordinal"], req["iteration"]), FX if req["ordinal"] == "OPEN" else "PASS")
            step = await call(c, "session_submit", session_id=sid, reply=reply)
        result = await call(c, "session_result", session_id=sid)
    assert result["ledger"].encode() == fixed_ledger.read_bytes()
    assert result["summary"]["total"] == fixed["total"] and result["summary"]["dates"] == fixed["dates"]
    capture = tmp_path / "capture.jsonl"
    capture.write_text(result["capture"])
    assert cli(["replay", str(capture), "--expect-ledger", str(fixed_ledger), "--backend", "direct", "--json"]) == 0


CME_FX = (
    "PLAN fx UNTIL 15:45 RISK maxpos 1000 maxloss 300\n"
    "WHEN last > high(30m): BUY 1000 MKT STOP -0.001 TARGET +0.002\n"
)
CME_FX1 = (
    "PLAN fx1 RISK maxpos 1 maxloss 1000\n"
    "WHEN last > high(30m): BUY 1 MKT STOP -0.001 TARGET +0.002\n"
)


@pytest.mark.parametrize("plan_text", [CME_FX, CME_FX1], ids=["refused", "trades"])
async def test_a_client_session_on_cme_futures_uses_the_multiplier(
    anyio_backend: str, shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], plan_text: str
) -> None:
    """6EH4 (multiplier 125000): the session's ledger is the fixed agent's, its capture replays,
    and the `simulate` tool is the CLI's summary."""
    path = shared_data / "bars_1min" / "nautilus_cme_6EH4_1min_bars_20240101_20240131.csv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    plan = tmp_path / f"{plan_text.split()[1]}.kes"  # the tool names the agent after the plan
    plan.write_text(plan_text)
    fixed_ledger = tmp_path / "fixed.jsonl"
    args = ("--data", str(path), "--date", "2024-01-10", "--days", "2")
    fixed = cli_json(capsys, "simulate", *args, "--agent", f"fixed:{plan}", "--ledger", str(fixed_ledger),
                     "--json", "--backend", "direct")
    async with connect("auto", roots=[shared_data]) as c:
        assert await call(c, "simulate", plan=plan_text, data=str(path), date="2024-01-10", days=2) == fixed
        step = await call(c, "session_start", data=str(path), date="2024-01-10", days=2)
        sid = step["session_id"]
        while not step["done"]:
            reply = plan_text if step["request"]["ordinal"] == "OPEN" else "PASS"
            step = await call(c, "session_submit", session_id=sid, reply=reply)
        result = await call(c, "session_result", session_id=sid)
    assert result["ledger"].encode() == fixed_ledger.read_bytes()
    capture = tmp_path / "capture.jsonl"
    capture.write_text(result["capture"])
    assert cli(["replay", str(capture), "--expect-ledger", str(fixed_ledger), "--backend", "direct", "--json"]) == 0


@pytest.mark.parametrize("mode", MODES)
async def test_view_refuses_an_at_outside_the_session_like_the_cli(
    anyio_backend: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with connect(mode) as c:
        for at in ("09:00", "00:00", "16:01"):
            capsys.readouterr()
            assert cli(["view", "VIEW v: quote", "--at", at]) == 2
            cli_err = capsys.readouterr().err
            assert cli_err.startswith(f"kestrel view: --at {at} is outside the last session (09:30-16:00 ")
            got = await reason(c, "view", view="VIEW v: quote", at=at)
            assert got == (f"at {at} is outside the session (09:30-16:00 America/New_York on 2024-04-15); "
                           "give a time within it")
        assert (await call(c, "view", view="VIEW v: quote", at="16:00"))["date"] == "2024-04-15"


@pytest.mark.parametrize("mode", MODES)
async def test_a_bad_sample_seed_is_one_clear_message(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        for tool, args in (("view", {"view": "VIEW v: quote", "at": "10:30"}), ("simulate", {"plan": ORB}),
                           ("session_start", {})):
            got = await reason(c, tool, data="sample|seed=abc", **args)
            assert got == "the seed in data 'sample|seed=abc' must be a whole number >= 0, got 'abc'"
            got = await reason(c, tool, data="sample|seed=-1", **args)
            assert got == "the seed in data 'sample|seed=-1' must be a whole number >= 0, got '-1'"
            assert "at most 2**63-1" in await reason(c, tool, data=f"sample|seed={2**63}", **args)
        assert (await call(c, "view", view="VIEW v: quote", at="10:30", data="sample|seed=7"))["text"]


@pytest.mark.parametrize("mode", MODES)
async def test_reported_token_counts_are_bounded(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        start = await call(c, "session_start")
        sid = start["session_id"]
        for name in ("input_tokens", "output_tokens"):
            got = await reason(c, "session_submit", session_id=sid, reply="PASS", **{name: 10**400})
            assert got == f"{name} must be 0 to 1_000_000_000 (tokens of this call), got a larger number"
            got = await reason(c, "session_submit", session_id=sid, reply="PASS", **{name: 10**9 + 1})
            assert got == f"{name} must be 0 to 1_000_000_000 (tokens of this call), got 1000000001"
        step = await call(c, "session_submit", session_id=sid, reply="PASS", input_tokens=10**9, output_tokens=0)
        assert step["done"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_prompt_is_a_clear_error(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        with pytest.raises(Exception, match="Unknown prompt: 'nosuch'; the prompts are author_plan"):
            await c.get_prompt("nosuch")


def test_the_cli_refuses_a_sample_seed_past_what_a_capture_holds(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli(["view", "VIEW v: quote", "--seed", str(2**63)]) == 2
    assert f"--seed must be at most 2**63-1 ({2**63 - 1}), got {2**63}" in capsys.readouterr().err


@pytest.mark.parametrize("mode", MODES)
async def test_simulate_counts_are_integers_and_argument_errors_one_line(anyio_backend: str, mode: str) -> None:
    async with connect(mode) as c:
        got = await call(c, "simulate", plan=ORB)
        total = got["total"]
        # as in --json: the counts are ints (2 == 2.0 in Python, so the types are asserted)
        assert {k: type(total[k]) for k in ("fills", "orders", "trades", "wins")} == dict.fromkeys(
            ("fills", "orders", "trades", "wins"), int)
        assert all(type(d[k]) is int for d in got["days"] for k in ("fills", "orders", "trades", "wins"))
        text = await reason(c, "simulate", plan=ORB, days="many")
        assert text == "argument 'days': Input should be a valid integer (got 'many')"
        text = await reason(c, "view", view=3)
        assert text == "argument 'view': Input should be a valid string (got 3); argument 'at' is required"
