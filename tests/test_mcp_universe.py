"""A universe as the data of an MCP tool call, through the official MCP client: a long-format
file without `symbol=` is refused with one line naming where universes run and how to pick one
member (a folder is refused as data as any folder is); `PATH|symbol=SYM` trades that one member."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402

pytestmark = pytest.mark.anyio
PLAN = "PLAN a UNTIL 15:45 RISK maxpos 10 maxloss 300\nWHEN pos == 0: BUY 10 MKT\n"


@asynccontextmanager
async def connect(root: Path) -> AsyncIterator[Client]:
    async with open_host() as h:
        async with Client(build_server(h, roots=DataRoots.of([str(root)])), mode="legacy") as client:
            yield client


def _long(path: Path) -> Path:
    rows = ["date,symbol,open,high,low,close,volume"]
    for i, d in enumerate(["2024-03-04", "2024-03-05", "2024-03-06"]):
        for sym, base in (("AAA", 50.0), ("BBB", 20.0)):
            o = base + i
            rows.append(f"{d},{sym},{o:.2f},{o + 1:.2f},{o - 1:.2f},{o + 0.5:.2f},1000")
    path.write_text("\n".join(rows) + "\n")
    return path


async def test_a_universe_is_refused_and_one_member_runs(anyio_backend: str, tmp_path: Path) -> None:
    data = _long(tmp_path / "u.csv")
    folder = tmp_path / "members"
    folder.mkdir()
    (folder / "AAA.csv").write_text("date,open,high,low,close,volume\n2024-03-04,1,1,1,1,1\n")
    async with connect(tmp_path) as c:
        for name, words in ((str(data), "universes run through `kestrel simulate` and `kestrel sweep`"),
                            (str(folder), "is a folder: give a CSV or Parquet file in it")):
            result = await c.call_tool("simulate", {"plan": PLAN, "data": name})
            assert result.is_error
            text = str(result.content[0].text)  # type: ignore[union-attr]
            assert "\n" not in text and "Traceback" not in text and words in text, text
        result = await c.call_tool("session_start", {"agent": "baseline", "data": str(data)})
        assert result.is_error and "kestrel sweep" in str(result.content[0].text)  # type: ignore[union-attr]
        result = await c.call_tool("simulate", {"plan": PLAN, "data": f"{data}|symbol=BBB", "days": 3})
        assert not result.is_error, result.content
        doc = result.structured_content
        assert doc is not None and doc["total"]["fills"] >= 1
