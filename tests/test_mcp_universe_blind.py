"""Blind mode and news over a universe through the official MCP client: `simulate` with
`blind` and/or `news` returns the document `kestrel simulate --data U --blind --news F --json`
prints for the same plans (written ON the aliases, on the blind scale); the news file is
confined to the server's data roots as one symbol's is; a blind client session over a universe
reads no real symbol, company name, date, year, price level or volume in any request, view or
status it gets, its replies (over the aliases) trade the real symbols, and the same session on
asyncio and trio gives byte-identical ledgers and captures."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from blind_support import BlindScan  # noqa: E402
from kestrel.cli import main  # noqa: E402
from mcp_support import call, refusal  # noqa: E402
from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402

DAYS = [dt.date(2024, 3, 4) + dt.timedelta(days=k) for k in (0, 1, 2, 3, 4, 7)]
# real prices far from the blind scale (first price 100): a real level in a text is a leak
MEMBERS = (("AAPL", 181.37, 0.83, 5_123_457), ("MSFT", 412.19, -1.41, 2_716_933), ("JPM", 193.53, 0.57, 8_264_171))
MODULE = ("PLAN a ON SYM1\nWHEN pos == 0: BUY 10 MKT\n"
          "PLAN b ON SYM2\nWHEN pos == 0 AND SYM3.last > 50: BUY $1000 MKT\n")
REAL_MODULE = "PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\nPLAN b ON JPM\nWHEN pos == 0: BUY $1000 MKT\n"


def _universe(path: Path) -> Path:
    rows = ["date,symbol,open,high,low,close,volume"]
    for i, d in enumerate(DAYS):
        for sym, base, step, vol in MEMBERS:
            o = base + step * i
            rows.append(f"{d},{sym},{o:.2f},{o + 1.13:.2f},{o - 0.97:.2f},{o + step / 2:.2f},{vol + 7919 * i}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _news(path: Path) -> Path:
    """Headlines naming the companies, their tickers, dates, years and price levels."""
    items = []
    for d in DAYS:
        items += [
            {"published_utc": f"{d}T12:30:00Z", "symbol": "AAPL", "source": "Wire",
             "title": f"Apple's iPhone sales lift AAPL to ${MEMBERS[0][1]:.2f} on {d:%B} {d.day}, {d.year}",
             "summary": f"Tim Cook said so on {d.day} {d:%B}; Microsoft and JPMorgan Chase rallied."},
            {"published_utc": f"{d}T13:00:00Z", "symbol": "MSFT", "source": "Wire",
             "title": f"Microsoft (MSFT) trades near {MEMBERS[1][1]:.2f}", "summary": f"filed {d.isoformat()}"},
        ]
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def _scan() -> BlindScan:
    prices = [(base + min(0.0, step * 5) - 0.97, base + max(0.0, step * 5) + 1.13) for _, base, step, _ in MEMBERS]
    volumes = [vol + 7919 * i for _, _, _, vol in MEMBERS for i in range(len(DAYS))]
    return BlindScan.of([m[0] for m in MEMBERS], DAYS, prices, volumes)


@asynccontextmanager
async def connect(root: Path) -> AsyncIterator[Client]:
    async with open_host() as h:
        async with Client(build_server(h, roots=DataRoots.of([str(root)])), mode="legacy") as client:
            yield client


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["simulate", *argv, "--json", "--backend", "direct"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.anyio
@pytest.mark.parametrize("blind,with_news", [(True, True), (True, False), (False, True)])
async def test_simulate_blind_and_news_over_a_universe_is_the_cli_document(
        anyio_backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], blind: bool, with_news: bool) -> None:
    data, news = _universe(tmp_path / "u.csv"), _news(tmp_path / "headlines.jsonl")
    text = MODULE if blind else REAL_MODULE
    plan = tmp_path / "plans.kes"
    plan.write_text(text)
    args: dict[str, Any] = {"plan": text, "data": str(data), "days": 3, "capital": 20000}
    flags = ["--data", str(data), "--days", "3", "--capital", "20000", "--agent", f"fixed:{plan}"]
    if blind:
        args["blind"], flags = True, [*flags, "--blind"]
    if with_news:
        args["news"], flags = str(news), [*flags, "--news", str(news)]
    async with connect(tmp_path) as c:
        doc = await call(c, "simulate", **args)
    assert doc == _cli_json(capsys, *flags)
    held = {h["symbol"]: h for h in doc["holdings"]}
    assert set(held) == {"AAPL", "MSFT", "JPM"}  # the ledger and report are real
    traded = {s for s, h in held.items() if h["fills"]}
    assert len(traded) == 2 and (blind or traded == {"AAPL", "JPM"})


@pytest.mark.anyio
async def test_a_blind_simulate_reads_its_plans_over_the_aliases(anyio_backend: str, tmp_path: Path) -> None:
    data = _universe(tmp_path / "u.csv")
    async with connect(tmp_path) as c:
        real = await refusal(c, "simulate", plan=REAL_MODULE, data=str(data), blind=True)
        unknown = await refusal(c, "simulate", plan="PLAN a ON SYM7\nWHEN pos == 0: BUY 1 MKT\n", data=str(data),
                                blind=True)
        none = await refusal(c, "simulate", plan="PASS", data=str(data), blind=True)
    assert "AAPL" in real and "SYM1" in real, real  # the client's own word, refused naming the aliases
    assert "SYM7" in unknown and "\n" not in unknown
    assert "SYM1" in none and "AAPL" not in none and "MSFT" not in none, none


@pytest.mark.anyio
async def test_a_news_file_is_confined_to_the_data_roots_as_for_one_symbol(anyio_backend: str,
                                                                          tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    data, news = _universe(root / "u.csv"), _news(outside / "headlines.jsonl")
    async with connect(root) as c:
        wide = await refusal(c, "simulate", plan=REAL_MODULE, data=str(data), news=str(news))
        started = await refusal(c, "session_start", data=str(data), news=str(news), blind=True)
        one = await refusal(c, "simulate", plan="PLAN a\nWHEN pos == 0: BUY 1 MKT\n", data=f"{data}|symbol=AAPL",
                            news=str(news))
        missing = await refusal(c, "simulate", plan=REAL_MODULE, data=str(data), news=str(root / "none.jsonl"))
    reasons = {text.split(": ", 1)[1] for text in (wide, started, one)}  # after "Error executing tool NAME"
    assert len(reasons) == 1, reasons
    assert "\n" not in wide and "outside this server's data roots" in wide
    assert "none.jsonl" in missing and "\n" not in missing


async def _blind_session(root: Path, data: Path, news: Path, scan: BlindScan) -> tuple[bytes, bytes, list[str]]:
    """A blind client session with news over the universe, every text the client reads before
    the end scanned: the ledger, the capture and the texts read."""
    seen: list[str] = []

    def read(doc: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(doc)
        scan.check(text)
        seen.append(text)
        return doc

    async with connect(root) as c:
        first = read(await call(c, "session_start", data=str(data), news=str(news), blind=True, days=2,
                                checkpoints="11:00", capital=50000))
        sid, req = first["session_id"], first["request"]
        assert req["date"] == "d5" and "WATCHLIST" in req["briefing"] and "SYM1" in req["briefing"]
        status = read(await call(c, "session_status", session_id=sid))
        assert status["symbol"] == "SYM1,SYM2,SYM3" and status["dates"] == ["d5", "d6"]
        view = read(await call(c, "session_submit", session_id=sid, reply="VIEW v: quote(SYM1), bars(SYM2, 1d, 5), "
                               "news(symbol=all, n=10), watchlist, portfolio"))
        assert view["request"]["view_name"] == "v" and "SYM2" in view["request"]["briefing"]
        repair = read(await call(c, "session_submit", session_id=sid,
                                 reply="PLAN z ON SYM9\nWHEN pos == 0: BUY 1 MKT\n"))
        assert "SYM9" in (repair["request"]["repair_error"] or "")
        review = read(await call(c, "session_submit", session_id=sid, reply=(
            "PLAN a ON SYM1 RISK maxpos 100000\nWHEN pos == 0: BUY 90000 MKT\n"
            "PLAN b ON SYM2\nWHEN pos == 0 AND SYM3.last > 50: BUY $2000 LMT 99.5\n")))
        out = review
        while not out["done"]:
            out = await call(c, "session_submit", session_id=sid, reply=MODULE if out is review else "PASS")
            if not out["done"]:
                read(out)
        result = await call(c, "session_result", session_id=sid)
    return result["ledger"].encode(), result["capture"].encode(), seen


def test_a_blind_client_session_with_news_reads_nothing_real_and_trades_the_real_symbols(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, news, scan = _universe(tmp_path / "u.csv"), _news(tmp_path / "headlines.jsonl"), _scan()
    runs = {b: anyio.run(_blind_session, tmp_path, data, news, scan, backend=b) for b in ("asyncio", "trio")}
    (ledger, capture, seen), (trio_ledger, trio_capture, _) = runs["asyncio"], runs["trio"]
    assert ledger == trio_ledger and capture == trio_capture
    fills = [json.loads(line) for line in ledger.decode().splitlines() if '"event":"fill"' in line]
    traded = {f["symbol"] for f in fills}
    assert len(traded) == 2 and traded <= {"AAPL", "MSFT", "JPM"} and b"SYM" not in ledger, traded
    assert any("NEWS all" in t and "$[n]" in t and "[date]" in t for t in seen)  # the news was read, masked
    assert any("bound check: plan a ON SYM1" in t for t in seen)  # the re-ask's findings read blind too
    head = json.loads(capture)
    assert head["news"]["sha256"] == hashlib.sha256(news.read_bytes()).hexdigest() and head["blind"] is True
    cap = tmp_path / "session.capture"
    cap.write_bytes(capture)
    capsys.readouterr()
    assert main(["replay", str(cap), "--json"]) == 0, capsys.readouterr().err


STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
STOCKBENCH_NEWS = "news/stockbench_dow20_news_20241231_20250730.jsonl"
STOCKBENCH_SYMBOLS = ("AAPL", "MSFT", "JPM", "GS")


def _stockbench_scan(path: Path) -> BlindScan:
    import pandas as pd  # type: ignore[import-untyped]

    raw = pd.read_parquet(path)
    raw = raw[raw["symbol"].isin(STOCKBENCH_SYMBOLS)]
    prices = [(float(g["low"].min()), float(g["high"].max())) for _, g in raw.groupby("symbol")]
    dates = [dt.date.fromisoformat(str(d)[:10]) for d in sorted(set(raw["date"].astype(str)))]
    return BlindScan.of(STOCKBENCH_SYMBOLS, dates, prices, {float(v) for v in raw["volume"] if v > 1500})


@pytest.mark.anyio
async def test_a_blind_client_session_over_stockbench_with_its_news(anyio_backend: str, shared_data: Path) -> None:
    """The shared StockBench universe and its news: four members, three sessions with a
    checkpoint, every request and view scanned; the replies over the aliases trade real members."""
    data, news = shared_data / STOCKBENCH, shared_data / STOCKBENCH_NEWS
    if not news.is_file():
        pytest.skip(f"shared news not present at {news}")
    scan = _stockbench_scan(data)
    async with connect(shared_data) as c:
        doc = await call(c, "session_start", data=str(data), symbols=list(STOCKBENCH_SYMBOLS), news=str(news),
                         blind=True, date="2025-03-12", days=3)
        sid = doc["session_id"]
        scan.check(json.dumps(doc))
        assert doc["request"]["date"].startswith("d") and "SYM4" in doc["request"]["briefing"]
        step = await call(c, "session_submit", session_id=sid, reply="VIEW v: news(symbol=all, n=20), "
                          "bars(SYM1, 1d, 10), quote(SYM4), watchlist, portfolio")
        scan.check(json.dumps(step))
        assert "NEWS all" in step["request"]["briefing"]
        while not step["done"]:
            scan.check(json.dumps(await call(c, "session_status", session_id=sid)))
            step = await call(c, "session_submit", session_id=sid,
                              reply="PLAN a ON SYM1\nWHEN pos == 0: BUY $5000 MKT\nPLAN b ON SYM3\n"
                                    "WHEN pos == 0 AND SYM4.chg(1d) > -50%: BUY 10%EQ MKT\n")
            if not step["done"]:
                scan.check(json.dumps(step))
        result = await call(c, "session_result", session_id=sid)
    traded = {json.loads(line)["symbol"] for line in result["ledger"].splitlines() if '"event":"fill"' in line}
    assert len(traded) == 2 and traded <= set(STOCKBENCH_SYMBOLS), traded


@pytest.mark.anyio
async def test_a_blind_client_session_of_one_member_reads_session_numbers(anyio_backend: str, tmp_path: Path) -> None:
    """One member of the file (`PATH|symbol=AAPL`), blind with news: its requests, views and
    status read the alias and session numbers, never the member's symbol, dates or prices."""
    data, news = _universe(tmp_path / "u.csv"), _news(tmp_path / "headlines.jsonl")
    base, step = MEMBERS[0][1], MEMBERS[0][2]
    scan = BlindScan.of(["AAPL"], DAYS, [(base - 0.97, base + step * 5 + 1.13)])
    async with connect(tmp_path) as c:
        doc = await call(c, "session_start", data=f"{data}|symbol=AAPL", news=str(news), blind=True, days=2)
        sid = doc["session_id"]
        status = await call(c, "session_status", session_id=sid)
        view = await call(c, "session_submit", session_id=sid, reply="VIEW v: quote, bars(1d, 5), news(n=10)")
        review = await call(c, "session_submit", session_id=sid,
                            reply="PLAN a RISK maxpos 100000\nWHEN pos == 0: BUY 90000 MKT")
    assert status.pop("data").endswith("u.csv|symbol=AAPL")  # the client's own argument, echoed
    for text in (doc, status, view, review):
        scan.check(json.dumps(text))
    assert doc["request"]["date"] == "d5" and status["symbol"] == "SYM1" and status["dates"] == ["d5", "d6"]
    assert "NEWS" in view["request"]["briefing"] and "bound check" in (review["request"]["repair_error"] or "")
