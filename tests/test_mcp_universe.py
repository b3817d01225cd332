"""A universe through the official MCP client: `simulate` over a long-format file (a `symbol`
column, or any portfolio argument) returns the document `kestrel simulate --data UNIVERSE
--json` prints for the same run; a client session over a universe (the client as the agent)
views per-symbol panes, submits modules of `ON SYM` plans, and ends with the ledger of the CLI's
run of the same turns and a capture `kestrel replay` verifies; bad universe requests get one
line naming the fix; `PATH|symbol=SYM` still trades one member."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.cli import main  # noqa: E402
from mcp_support import call, stdio_client  # noqa: E402
from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402

pytestmark = pytest.mark.anyio
PLAN = "PLAN a UNTIL 15:45 RISK maxpos 10 maxloss 300\nWHEN pos == 0: BUY 10 MKT\n"
MODULE = "PLAN a ON AAA\nWHEN pos == 0: BUY 10 MKT\nPLAN b ON BBB\nWHEN pos == 0: BUY 20 MKT\n"
MINUTE_TRADES = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
DATES = ["2024-03-04", "2024-03-05", "2024-03-06", "2024-03-07"]


@asynccontextmanager
async def connect(root: Path) -> AsyncIterator[Client]:
    async with open_host() as h:
        async with Client(build_server(h, roots=DataRoots.of([str(root)])), mode="legacy") as client:
            yield client


def _long(path: Path) -> Path:
    rows = ["date,symbol,open,high,low,close,volume"]
    for i, d in enumerate(DATES):
        for sym, base, step in (("AAA", 50.0, 1.0), ("BBB", 20.0, -0.5), ("CCC", 80.0, 2.0)):
            o = base + step * i
            rows.append(f"{d},{sym},{o:.2f},{o + 1:.2f},{o - 1:.2f},{o + step / 2:.2f},1000")
    path.write_text("\n".join(rows) + "\n")
    return path


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["simulate", *argv, "--json", "--backend", "direct"]) == 0  # inside a running event loop
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


async def test_simulate_over_a_universe_is_the_cli_document(anyio_backend: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv")
    plan = tmp_path / "plan.kes"
    plan.write_text(MODULE)
    async with connect(tmp_path) as c:
        result = await c.call_tool("simulate", {"plan": MODULE, "data": str(data), "symbols": ["AAA", "BBB"],
                                                "capital": 5000, "max_open": 2, "days": 3})
        assert not result.is_error, result.content
        doc = result.structured_content
        every = await c.call_tool("simulate", {"plan": MODULE, "data": str(data), "days": 2})
        assert not every.is_error, every.content
    ref = _cli_json(capsys, "--data", str(data), "--symbols", "AAA,BBB", "--capital", "5000", "--max-open", "2",
                    "--days", "3", "--agent", f"fixed:{plan}")
    assert doc == ref
    assert doc["symbols"] == ["AAA", "BBB"] and doc["dates"] == DATES[1:] and doc["fills"] >= 2
    assert every.structured_content is not None and every.structured_content["symbols"] == ["AAA", "BBB", "CCC"]


async def test_bad_universe_requests_get_one_line(anyio_backend: str, tmp_path: Path) -> None:
    data = _long(tmp_path / "u.csv")
    folder = tmp_path / "members"
    folder.mkdir()
    (folder / "AAA.csv").write_text("date,open,high,low,close,volume\n2024-03-04,1,1,1,1,1\n")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"plan": MODULE, "data": str(folder)}, "is a folder: give a CSV or Parquet file in it"),
        ({"plan": MODULE, "data": str(data), "symbols": "AAA,ZZZ"}, "ZZZ"),
        ({"plan": PLAN, "data": str(data)}, "ON"),
        ({"plan": MODULE, "data": f"{data}|symbol=AAA", "capital": 100}, "takes no data options"),
        ({"plan": MODULE, "data": str(data), "blind": True}, "SYM1"),  # blind: the plans are ON the aliases
        ({"plan": MODULE, "data": "sample", "capital": 1000}, "'sample' is one symbol"),
        ({"plan": MODULE, "data": str(data), "capital": -5}, "capital"),
        ({"plan": MODULE, "data": str(data), "days": 9}, "holds only"),
        ({"plan": "PLAN a ON AAA\nWHEN pos == 0: BUY 10 MKT\nPLAN z ON ZZZ\nWHEN pos == 0: BUY 1 MKT",
          "data": str(data)}, "ZZZ"),
    ]
    async with connect(tmp_path) as c:
        for args, words in cases:
            result = await c.call_tool("simulate", args)
            assert result.is_error, args
            text = _text(result)
            assert "\n" not in text and "Traceback" not in text and words in text, (args, text)
        result = await c.call_tool("session_start", {"data": str(data), "symbols": "QQQ"})
        assert result.is_error and "QQQ" in _text(result)


async def test_one_member_of_a_long_file_still_runs_alone(anyio_backend: str, tmp_path: Path) -> None:
    data = _long(tmp_path / "u.csv")
    async with connect(tmp_path) as c:
        result = await c.call_tool("simulate", {"plan": PLAN, "data": f"{data}|symbol=BBB", "days": 3})
        assert not result.is_error, result.content
        doc = result.structured_content
        assert doc is not None and doc["symbol"] == "BBB" and doc["total"]["fills"] >= 1


async def test_a_client_session_over_a_universe(anyio_backend: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = _long(tmp_path / "u.csv")
    plan = tmp_path / "plan.kes"
    plan.write_text(MODULE)
    async with connect(tmp_path) as c:
        started = await c.call_tool("session_start", {"data": str(data), "symbols": "AAA,BBB", "capital": 5000,
                                                      "days": 2})
        assert not started.is_error, started.content
        doc = started.structured_content
        assert doc is not None and not doc["done"]
        sid, first = doc["session_id"], doc["request"]
        assert first["date"] == DATES[2] and first["ordinal"] == "OPEN" and "WATCHLIST" in first["briefing"]
        view = await c.call_tool("session_submit", {"session_id": sid,
                                                    "reply": "VIEW v: quote(BBB), watchlist, portfolio"})
        seen = view.structured_content
        assert seen is not None and seen["request"]["view_name"] == "v"
        assert seen["request"]["date"] == DATES[2] and "PORTFOLIO" in seen["request"]["briefing"]
        bad = await c.call_tool("session_submit", {"session_id": sid, "reply": PLAN})
        repair = bad.structured_content
        assert repair is not None and "ON" in (repair["request"]["repair_error"] or "")
        nxt = await c.call_tool("session_submit", {"session_id": sid, "reply": MODULE})
        second = nxt.structured_content
        assert second is not None and second["request"]["date"] == DATES[3]
        status = await c.call_tool("session_status", {"session_id": sid})
        st = status.structured_content
        assert st is not None and st["symbol"] == "AAA,BBB" and st["state"] == "waiting"
        assert st["dates"] == DATES[2:] and st["turns"] == 1
        end = await c.call_tool("session_submit", {"session_id": sid, "reply": MODULE})
        done = end.structured_content
        assert done is not None and done["done"] and done["state"] == "done"
        assert done["summary"]["dates"] == DATES[2:]
        res = await c.call_tool("session_result", {"session_id": sid})
        assert not res.is_error, res.content
        got = res.structured_content
        assert got is not None
    ledger = tmp_path / "ref.jsonl"
    ref = _cli_json(capsys, "--data", str(data), "--symbols", "AAA,BBB", "--capital", "5000", "--days", "2",
                    "--agent", f"fixed:{plan}", "--ledger", str(ledger))
    assert got["ledger"] == ledger.read_text()
    assert '"event":"fill"' in got["ledger"]
    assert got["summary"]["metrics"] == ref["metrics"] and got["summary"]["holdings"] == ref["holdings"]
    cap = tmp_path / "session.capture"
    cap.write_text(got["capture"])
    capsys.readouterr()
    assert main(["replay", str(cap)]) == 0
    assert "ledger identical" in capsys.readouterr().err


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
async def test_a_client_session_over_the_minute_universe_on_a_stdio_server(
        anyio_backend: str, server_backend: str, shared_data: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`kestrel mcp` as a subprocess serving the shared data: a session over SPY and IBM minute
    bars with a checkpoint, a VIEW of both quotes, a module of SMA crosses, a PASS; its ledger is
    the CLI's run of the same module."""
    data = str(shared_data / MINUTE_TRADES)
    module = "\n".join(f"PLAN {s.lower()} ON {s}\nWHEN last CROSSES ABOVE sma(last, 20) AND pos == 0: BUY 20 MKT\n"
                       f"WHEN last CROSSES BELOW sma(last, 20) AND pos > 0: FLAT" for s in ("SPY", "IBM"))
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(server_backend, "legacy", errlog, "--data-root", str(shared_data)) as c:
            start = await call(c, "session_start", data=data, symbols="SPY,IBM", capital=20000, checkpoints="12:00")
            sid = start["session_id"]
            step = await call(c, "session_submit", session_id=sid, reply="VIEW q: quote(SPY), quote(IBM), watchlist")
            brief = step["request"]["briefing"]
            assert "QUOTE SPY" in brief and "QUOTE IBM" in brief and "WATCHLIST" in brief
            step = await call(c, "session_submit", session_id=sid, reply=module)
            assert step["request"]["ordinal"] == "12:00"
            done = await call(c, "session_submit", session_id=sid, reply="PASS")
            assert done["done"] is True and done["state"] == "done"
            result = await call(c, "session_result", session_id=sid)
    plan = tmp_path / "plan.kes"
    plan.write_text(module)
    ledger = tmp_path / "ref.jsonl"
    _cli_json(capsys, "--data", data, "--symbols", "SPY,IBM", "--capital", "20000", "--checkpoints", "12:00",
              "--agent", f"fixed:{plan}", "--ledger", str(ledger))
    assert result["ledger"] == ledger.read_text() and '"event":"fill"' in result["ledger"]
    assert result["summary"]["symbols"] == ["IBM", "SPY"]  # the universe's order, sorted
