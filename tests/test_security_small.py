"""Security: the smaller holes of observation 8. Symbols are printable and bounded; terminal
output escapes control characters; bad paths are one line and exit 2; errors sent to a client
name no working folder, home or pid; the data cache is keyed by the file's identity and checked
against its SHA-256; a capture without its ledger checksum replays only with --no-verify; a
data path is recorded the same way by `simulate`, the daemon and the MCP server."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.cli import main  # noqa: E402
from kestrel.market.instrument import Instrument  # noqa: E402
from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402
from security_support import call, refusal  # noqa: E402

pytestmark = pytest.mark.anyio
PLAN = "PLAN p RISK maxpos 10 maxloss 1000\nWHEN last > 0: BUY 1 MKT STOP -0.002 TARGET +0.002\n"
ESC = "\x1b"


@asynccontextmanager
async def connect(roots: list[Path]) -> AsyncIterator[Client]:
    async with open_host() as h:
        async with Client(build_server(h, roots=DataRoots.of([str(r) for r in roots])), mode="legacy") as c:
            yield c


def quotes(path: Path, step: float = 1e-4) -> Path:
    rows = ["timestamp,bid,ask"] + [
        f"2024-04-15T{13 + i // 60:02d}:{i % 60:02d}:00Z,{1.1 + i * step:.5f},{1.1 + i * step + 2e-4:.5f}"
        for i in range(240)
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


async def test_symbols_are_printable_and_bounded(anyio_backend: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    q = quotes(tmp_path / "q.csv")
    async with connect([tmp_path]) as c:
        for symbol in (f"EUR{ESC}[2J", "A B", "X" * 33, ""):
            text = await refusal(c, "simulate", plan=PLAN, data=f"q.csv|preset=truefx|symbol={symbol}")
            assert ESC not in text and ("symbol must be" in text or "control character" in text), text
        got = await call(c, "simulate", plan=PLAN.replace("PLAN p", "PLAN p ON EUR/USD"),
                         data="q.csv|preset=truefx|symbol=EUR/USD")
        assert got["symbol"] == "EUR/USD"
    for bad in (f"A{ESC}", "A\n", "é"):
        with pytest.raises(ValueError, match="symbol must be"):
            Instrument(symbol=bad, tick_size=0.01)
    capsys.readouterr()
    assert main(["simulate", "--data", str(q), "--preset", "truefx", "--symbol", f"EUR{ESC}[31m", "--json"]) == 2
    err = capsys.readouterr().err
    assert ESC not in err and "symbol must be" in err and err.count("\n") == 1


def test_terminal_output_escapes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture edited to carry escape sequences in its header prints them escaped."""
    plan = tmp_path / "orb.kes"
    plan.write_text(PLAN)
    capture = tmp_path / "c.jsonl"
    assert main(["simulate", "--agent", f"fixed:{plan}", "--capture", str(capture)]) == 0
    lines = capture.read_text().splitlines()
    header = json.loads(lines[0])
    header["agent"] = f"fixed:orb{ESC}]0;owned{ESC}\\{ESC}[2J"
    header["data"] = f"sample{ESC}[31m[/bold]"  # rich markup too
    capture.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    capsys.readouterr()
    assert main(["replay", str(capture)]) == 0
    out = capsys.readouterr()
    assert ESC not in out.out and ESC not in out.err
    assert "\\x1b[2J" in out.out and "[/bold]" in out.out
    capsys.readouterr()
    assert main(["simulate", "--data", str(tmp_path / f"no{ESC}[2Jfile.csv")]) == 2
    err = capsys.readouterr().err
    assert ESC not in err and "\\x1b[2J" in err


def test_bad_paths_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    os.mkfifo(tmp_path / "fifo.csv")
    for path in (str(tmp_path / "loop1"), "~nosuchuser/x.csv", str(tmp_path), str(tmp_path / "fifo.csv"),
                 str(tmp_path / "loop1" / "x.csv")):
        for argv in (["simulate", "--data", path, "--json"], ["view", "VIEW v: quote", "--data", path]):
            capsys.readouterr()
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "internal error" not in err and "Traceback" not in err, err


async def test_bad_paths_over_mcp_are_one_line_refusals(anyio_backend: str, tmp_path: Path) -> None:
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    async with connect([tmp_path]) as c:
        for name in ("\x00", "loop1", "~nosuchuser/x.csv", "a\x00b.csv", "x" * 5000, "sample|seed=1|seed=2",
                     "q.csv|nosuch=1"):
            text = await refusal(c, "simulate", plan=PLAN, data=name)
            assert "internal error" not in text and "\n" not in text and "\x00" not in text, text


async def test_errors_sent_to_a_client_name_no_folder_home_or_pid_of_the_server(
        anyio_backend: str, tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "bad.csv").write_text("timestamp,bid,ask\nnot-a-time,1,2\n")
    secrets = [str(served.resolve()), str(tmp_path.resolve())]
    home = os.environ.get("HOME", "")
    if len(home) > 1:
        secrets.append(home)
    if len(os.getcwd()) > 1:
        secrets.append(os.getcwd())
    pid = re.compile(rf"\b{os.getpid()}\b")
    async with connect([served]) as c:
        texts = [await refusal(c, "simulate", plan=PLAN, data=name)
                 for name in ("bad.csv|preset=truefx", "bad.csv", "missing.csv", "../x.csv", "/proc/self/environ",
                              "~/x.csv", "sub/../bad.csv|preset=oanda")]
        texts.append(await refusal(c, "session_status", session_id="nope"))
    for text in texts:
        assert not any(s in text for s in secrets), text
        assert not pid.search(text), text
    assert "bad.csv" in texts[0]  # the path as the client wrote it


async def test_the_cache_sees_a_file_rewritten_with_its_time_kept(anyio_backend: str, tmp_path: Path) -> None:
    """The MCP data cache was keyed by mtime only: a file rewritten with its mtime kept ran on
    stale data while the capture recorded the new SHA-256."""
    q = quotes(tmp_path / "q.csv", step=1e-4)
    stamp = os.stat(q)
    async with connect([tmp_path]) as c:
        first = await call(c, "simulate", plan=PLAN, data="q.csv|preset=truefx")
        size = q.stat().st_size
        quotes(q, step=-1e-4)  # other prices, the same length
        assert q.stat().st_size == size
        os.utime(q, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        second = await call(c, "simulate", plan=PLAN, data="q.csv|preset=truefx")
        step = await call(c, "session_start", data="q.csv|preset=truefx")
        sid = step["session_id"]
        while not step["done"]:
            step = await call(c, "session_submit", session_id=sid, reply=PLAN if step["request"]["ordinal"] == "OPEN"
                              else "PASS")
        result = await call(c, "session_result", session_id=sid)
    assert first["total"] != second["total"]
    header = json.loads(result["capture"].splitlines()[0])
    assert header["source"]["sha256"] == hashlib.sha256(q.read_bytes()).hexdigest()


def test_the_daemons_cache_sees_a_file_rewritten_with_its_time_kept(tmp_path: Path) -> None:
    from kestrel.cli.daemon import SimulatePlanner

    q = quotes(tmp_path / "q.csv", step=1e-4)
    stamp = os.stat(q)
    planner = SimulatePlanner(DataRoots.of([str(tmp_path)]))
    ns = planner.parser.parse_args(["--data", str(q), "--preset", "truefx"])
    _, first, _ = planner.load(ns)
    quotes(q, step=-1e-4)
    os.utime(q, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    ns = planner.parser.parse_args(["--data", str(q), "--preset", "truefx"])
    data, second, _ = planner.load(ns)
    assert first.sha256 != second.sha256 == hashlib.sha256(q.read_bytes()).hexdigest()


def test_a_capture_without_its_ledger_checksum_needs_no_verify(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A capture with its `ledger_sha256` removed replayed a tampered plan with exit 0."""
    plan = tmp_path / "orb.kes"
    plan.write_text(PLAN)
    capture = tmp_path / "c.jsonl"
    assert main(["simulate", "--agent", f"fixed:{plan}", "--capture", str(capture)]) == 0
    lines = capture.read_text().splitlines()
    header = json.loads(lines[0])
    header["ledger_sha256"] = None
    tampered = [json.dumps(header), *(line.replace("BUY 1 MKT", "BUY 9 MKT") for line in lines[1:])]
    capture.write_text("\n".join(tampered) + "\n")
    capsys.readouterr()
    assert main(["replay", str(capture)]) == 2
    err = capsys.readouterr().err
    assert "records no ledger checksum" in err and "--no-verify" in err and err.count("\n") == 1
    assert main(["replay", str(capture), "--no-verify"]) == 0
    assert "not verified" in capsys.readouterr().err


async def test_a_data_path_is_recorded_the_same_way_everywhere(anyio_backend: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """With a symlinked data folder the daemon's and MCP's recorded paths differed from
    `simulate`'s."""
    from kestrel.cli.daemon import SimulatePlanner

    real = tmp_path / "real"
    real.mkdir()
    quotes(real / "q.csv")
    link = tmp_path / "link"
    link.symlink_to(real)
    through = str(link / "q.csv")
    plan = tmp_path / "p.kes"
    plan.write_text(PLAN)
    capture = tmp_path / "c.jsonl"
    assert main(["simulate", "--data", through, "--preset", "truefx", "--agent", f"fixed:{plan}",
                 "--capture", str(capture), "--backend", "direct"]) == 0
    cli = json.loads(capture.read_text().splitlines()[0])
    async with connect([link]) as c:
        step = await call(c, "session_start", data=f"{through}|preset=truefx")
        sid = step["session_id"]
        while not step["done"]:
            step = await call(c, "session_submit", session_id=sid, reply="PASS")
        mcp = json.loads((await call(c, "session_result", session_id=sid))["capture"].splitlines()[0])
    planner = SimulatePlanner(DataRoots.of([str(link)]))
    flags, _ = planner.parse(["--data", through, "--preset", "truefx"], str(tmp_path))
    job = planner.resolve(flags)
    want = str((real / "q.csv").resolve())
    assert cli["data"] == want and cli["source"]["path"] == want
    assert mcp["data"].split("|")[0] == want and mcp["source"]["path"] == want
    assert job.run.options.data_name == want and job.run.options.source.path == want


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_count_arguments_are_json_integers(anyio_backend: str, mode: str) -> None:
    """A count is a JSON integer, as `--json` writes it: `true` is not one day, `"2"` not two."""
    async with open_host() as h, Client(build_server(h), mode=mode) as c:
        tools = {t.name: t.input_schema for t in (await c.list_tools()).tools}
        for tool, arg in (("simulate", "days"), ("session_start", "days"), ("session_start", "max_iterations"),
                          ("session_start", "token_budget"), ("session_submit", "input_tokens"),
                          ("session_submit", "output_tokens")):
            schema = tools[tool]["properties"][arg]
            assert "integer" in json.dumps(schema), (tool, arg, schema)
        base = {"simulate": {"plan": PLAN}, "session_start": {}}
        for tool in ("simulate", "session_start"):
            for bad in (True, "2", 2.5, "two", [2]):
                text = await refusal(c, tool, **base[tool], days=bad)
                assert "\n" not in text and "argument 'days'" in text, text
        for bad in (True, "3"):
            text = await refusal(c, "session_start", max_iterations=bad)
            assert "\n" not in text and "argument 'max_iterations'" in text, text
        started = await call(c, "session_start", days=2, max_iterations=3, token_budget=5000)
        sid = started["session_id"]
        text = await refusal(c, "session_submit", session_id=sid, reply="PASS", input_tokens="10")
        assert "argument 'input_tokens'" in text, text
        step = await call(c, "session_submit", session_id=sid, reply="PASS", input_tokens=10, output_tokens=2)
        assert step["done"] is False and step["request"]["date"] != started["request"]["date"]
