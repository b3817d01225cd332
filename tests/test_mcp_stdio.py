"""`kestrel mcp` as a real subprocess: the SDK's stdio client (both connection modes) against
the server on asyncio and on trio, streamable HTTP on 127.0.0.1, and, where node and the
official MCP inspector are installed, the inspector CLI's `tools/list`."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp_support import ROOT, call, client, free_port, stdio_client, wait_listening  # noqa: E402

from kestrel.agents.fixed import FixedAgent  # noqa: E402
from kestrel.data.sample import load_sample  # noqa: E402
from kestrel.session.runner import SessionOptions, run_session  # noqa: E402

pytestmark = pytest.mark.anyio

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
TOOLS = {
    "check", "format", "panes", "view", "simulate", "session_start", "session_submit",
    "session_status", "session_result", "session_close",
}


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_session_with_view_repair_and_plan(anyio_backend: str, server_backend: str, mode: str) -> None:
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(server_backend, mode, errlog) as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
            assert (await call(c, "check", source=ORB))["valid"] is True
            start = await call(c, "session_start", checkpoints="11:00")
            sid = start["session_id"]
            step = await call(c, "session_submit", session_id=sid, reply="VIEW scout: quote, levels")
            assert step["request"]["view_name"] == "scout"
            step = await call(c, "session_submit", session_id=sid, reply="PLAN")
            assert step["request"]["repair_error"]
            step = await call(c, "session_submit", session_id=sid, reply=ORB)
            assert step["request"]["ordinal"] == "11:00"
            done = await call(c, "session_submit", session_id=sid, reply="PASS")
            assert done["done"] is True
            result = await call(c, "session_result", session_id=sid)
            # bad input: a tool error, and the server keeps serving
            bad = await c.call_tool("session_submit", {"session_id": "nope", "reply": "PASS"})
            assert bad.is_error and "unknown session" in bad.content[0].text  # type: ignore[union-attr]
            bad = await c.call_tool("view", {"view": "VIEW v: nosuchpane", "at": "10:30"})
            assert bad.is_error
            bad = await c.call_tool("simulate", {"plan": ORB, "data": "/no/such/file.parquet"})
            assert bad.is_error and "reads no data files" in bad.content[0].text  # type: ignore[union-attr]
            assert "--data-root DIR" in bad.content[0].text  # type: ignore[union-attr]
            assert (await call(c, "panes"))["panes"]
            for bad_call in (lambda: c.read_resource("kestrel://examples/nope"),
                             lambda: c.get_prompt("nope", {}),
                             lambda: c.read_resource("kestrel://nothing")):
                with pytest.raises(Exception):  # an MCP error answer, whatever the SDK's wording
                    await bad_call()
            assert (await call(c, "check", source="PASS"))["valid"] is True
        errlog.seek(0)
        stderr = errlog.read()
    assert "Traceback" not in stderr, stderr
    fixed = run_session(load_sample(), FixedAgent(ORB), SessionOptions(checkpoints=("11:00",)))
    assert result["ledger"].encode() == fixed.ledger_jsonl()


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
async def test_streamable_http(anyio_backend: str, server_backend: str, tmp_path: Path) -> None:
    port = free_port()
    tokens = tmp_path / "tokens"
    proc = subprocess.Popen([sys.executable, "-m", "kestrel", "mcp", "--http", str(port), "--backend", server_backend,
                             "--token-file", str(tokens)],
                            cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, port)
        token = tokens.read_text().split()[-1]
        assert tokens.stat().st_mode & 0o777 == 0o600
        async with client(f"http://127.0.0.1:{port}/mcp", token, mode="auto") as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
            start = await call(c, "session_start")
            done = await call(c, "session_submit", session_id=start["session_id"], reply=ORB)
            assert done["done"] is True and done["summary"]["days"][0]["turns"][0]["turn"] == "PLAN orb"
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
    assert token not in stderr  # a token file's token is never printed


def test_bad_flags_exit_2() -> None:
    for args, message in ((["--http", "0"], "--http must be a port"),
                          (["--backend", "curio"], "invalid choice"),
                          (["--abandon-after", "0"], "--abandon-after")):
        out = subprocess.run([sys.executable, "-m", "kestrel", "mcp", *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def _inspector() -> bool:
    if shutil.which("npx") is None or shutil.which("node") is None:
        return False
    probe = subprocess.run(["npx", "--no-install", "@modelcontextprotocol/inspector", "--help"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                           cwd=tempfile.gettempdir())
    return probe.returncode == 0


def test_inspector_cli_lists_the_tools() -> None:
    if not _inspector():
        pytest.skip("node/npx or the MCP inspector (npm i -g @modelcontextprotocol/inspector) is not installed")
    out = subprocess.run(
        ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", sys.executable, "-m", "kestrel",
         "mcp", "--method", "tools/list"],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert out.returncode == 0, out.stderr
    import json

    tools = json.loads(out.stdout)["tools"]
    assert {t["name"] for t in tools} == TOOLS
    assert all("outputSchema" in t for t in tools)


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
def test_a_port_in_use_exits_2_with_one_line(server_backend: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "kestrel", "mcp", "--http", str(port), "--backend", server_backend],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"kestrel mcp: port {port} is in use on 127.0.0.1: pick another --http port\n"


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
def test_sigint_stops_the_http_server_with_130_on_both_backends(server_backend: str, tmp_path: Path) -> None:
    port = free_port()
    tokens = tmp_path / "tokens"
    tokens.write_text("t" * 40 + "\n")
    tokens.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-m", "kestrel", "mcp", "--http", str(port), "--backend", server_backend,
                             "--token-file", str(tokens)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, port)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, stderr) == (130, "kestrel: interrupted\n")
