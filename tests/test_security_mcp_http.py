"""Security: `kestrel mcp --http` as a hostile local client meets it (observations 4 and 5).
Every request needs a bearer token; sessions belong to the token that started them and carry
128 random bits; initialize floods fill nothing; a trickled body or header is cut off; a call
is bounded by its wall clock and its worker's CPU time and stops when its client hangs up."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from kestrel.service.host.host import new_session_id  # noqa: E402
from security_support import (  # noqa: E402
    CHECKPOINTS,
    HEAVY_PLAN,
    ROOT,
    TOKEN_A,
    TOKEN_B,
    UTC_CHECKPOINTS,
    call,
    client,
    long_trades_csv,
    mcp_server,
    refusal,
)

pytestmark = pytest.mark.anyio

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "probe", "version": "0"}}})


def post(port: int, body: str, token: str | None, timeout: float = 20) -> tuple[int, str]:
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-11-25"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    c.request("POST", "/mcp", body, headers)
    r = c.getresponse()
    out = (r.status, r.read().decode("utf-8", "replace"))
    c.close()
    return out


@pytest.mark.parametrize("server_backend", ["asyncio", "trio"])
async def test_no_token_no_service(anyio_backend: str, server_backend: str, tmp_path: Path) -> None:
    with mcp_server(tmp_path, backend=server_backend) as server:
        assert post(server.port, INIT, None)[0] == 401
        assert post(server.port, INIT, "x" * 40)[0] == 401
        assert post(server.port, INIT, TOKEN_A[:-1])[0] == 401
        assert post(server.port, INIT, TOKEN_A)[0] == 200
        with pytest.raises(Exception):
            async with client(server.url, None):
                pass
        async with client(server.url, TOKEN_A) as c:
            assert (await call(c, "check", source="PASS"))["valid"] is True
    assert TOKEN_A not in server.stderr() and "Traceback" not in server.stderr()


async def test_sessions_belong_to_the_client_that_started_them(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 4: client B could read, submit to and close client A's session."""
    with mcp_server(tmp_path) as server:
        async with client(server.url, TOKEN_A) as a, client(server.url, TOKEN_B, mode="auto") as b:
            sid = (await call(a, "session_start", checkpoints="11:00"))["session_id"]
            for tool, args in (("session_status", {}), ("session_submit", {"reply": "PASS"}),
                               ("session_result", {}), ("session_close", {})):
                theirs = await refusal(b, tool, session_id=sid, **args)
                none = await refusal(b, tool, session_id=new_session_id(), **args)
                assert "unknown session" in theirs
                assert re.sub(r"s[0-9a-f]{32}", "ID", theirs) == re.sub(r"s[0-9a-f]{32}", "ID", none)
            assert (await call(a, "session_status", session_id=sid))["state"] == "waiting"
            step = await call(a, "session_submit", session_id=sid, reply="PASS")
            assert step["request"]["ordinal"] == "11:00"
            assert (await call(a, "session_close", session_id=sid))["closed"] is True


def test_session_ids_carry_128_random_bits() -> None:
    """Observation 4: ids were a counter and 24 random bits (guessable at ~400 ids/s)."""
    ids = {new_session_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(re.fullmatch(r"s[0-9a-f]{32}", i) for i in ids)
    firsts = {int(i[1:], 16) >> 120 for i in ids}
    assert len(firsts) > 200  # the high byte varies too: no counter in front


async def test_an_initialize_flood_locks_no_one_out(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 5: ~10,000 initialize calls filled the SDK's session cap (503 for 30 min)."""
    import http.client

    with mcp_server(tmp_path) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        conn.request("POST", "/mcp", INIT, {"content-type": "application/json", "authorization": f"Bearer {TOKEN_B}",
                                             "accept": "application/json, text/event-stream"})
        answer = conn.getresponse()
        answer.read()
        conn.close()
        assert answer.status == 200 and answer.getheader("mcp-session-id") is None  # stateless: nothing kept
        statuses = [post(server.port, INIT, TOKEN_B)[0] for _ in range(400)]
        assert set(statuses) == {200}
        async with client(server.url, TOKEN_A) as c:
            assert (await call(c, "check", source="PASS"))["valid"] is True
        assert post(server.port, INIT, TOKEN_A)[0] == 200


def _slow_send(port: int, chunks: list[bytes], pause: float, limit: float) -> tuple[float, bytes]:
    """Send `chunks` `pause` s apart until the server answers or hangs up; (seconds, reply)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=limit)
    started = time.monotonic()
    reply = b""
    try:
        for chunk in chunks:
            s.sendall(chunk)
            s.settimeout(pause)
            try:
                got = s.recv(65536)
            except TimeoutError:
                continue
            reply += got
            break
        s.settimeout(max(0.1, limit - (time.monotonic() - started)))
        try:
            while True:
                got = s.recv(65536)
                if not got:
                    break
                reply += got
        except TimeoutError:
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    return time.monotonic() - started, reply


def test_a_trickled_body_and_trickled_headers_are_cut_off(tmp_path: Path) -> None:
    """Observation 5: a body sent one byte at a time held its connection open indefinitely."""
    with mcp_server(tmp_path, "--limit", "body_seconds=2", "--limit", "idle_seconds=2") as server:
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKEN_A}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: {len(INIT)}\r\n\r\n").encode()
        took, reply = _slow_send(server.port, [head, *(bytes([b]) for b in INIT.encode())], 0.25, 20)
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert took < 8
        took, reply = _slow_send(server.port, [bytes([b]) for b in head], 0.25, 20)  # headers trickled
        assert took < 8 and not reply.startswith(b"HTTP/1.1 200")
        status, _ = post(server.port, INIT, TOKEN_A)
        assert status == 200


def test_many_idle_connections_are_closed_and_clients_still_served(tmp_path: Path) -> None:
    """Observation 5: 420 trickling connections locked clients out under a 400-fd limit."""
    with mcp_server(tmp_path, "--limit", "idle_seconds=1") as server:
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(450)]
        try:
            for s in socks:
                s.sendall(b"POST /mcp HTTP/1.1\r\n")  # headers never finished
            assert post(server.port, INIT, TOKEN_A)[0] == 200  # served meanwhile
            time.sleep(3)
            closed = 0
            for s in socks:
                s.settimeout(2)
                try:
                    closed += s.recv(1) == b""
                except (TimeoutError, ConnectionResetError):
                    closed += 1
            assert closed == len(socks)
        finally:
            for s in socks:
                s.close()
        assert post(server.port, INIT, TOKEN_A)[0] == 200


async def test_a_call_is_bounded_by_its_cpu_and_its_wall_clock(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 5: one simulate took 150 s of CPU."""
    with mcp_server(tmp_path, "--limit", "call_cpu_seconds=0.3") as server:
        async with client(server.url, TOKEN_A) as c:
            started = time.monotonic()
            text = await refusal(c, "simulate", plan=HEAVY_PLAN, days=6, checkpoints=CHECKPOINTS)
            assert "used its 0.3 s of CPU time" in text and time.monotonic() - started < 20
            assert (await call(c, "check", source="PASS"))["valid"] is True
    with mcp_server(tmp_path, "--limit", "call_seconds=0.5") as server:
        async with client(server.url, TOKEN_A) as c:
            text = await refusal(c, "simulate", plan=HEAVY_PLAN, days=6, checkpoints=CHECKPOINTS)
            assert "ran over its 0.5 s of wall clock" in text


def test_a_call_stops_when_its_client_hangs_up(tmp_path: Path) -> None:
    """Observation 5: the simulate kept running 140 s after its client hung up. Here a month of
    data, 32 rules and 36 checkpoints a day (about 8 s of CPU): once the client is killed, the
    server's CPU falls to nothing."""
    data = long_trades_csv(tmp_path / "month.csv")
    script = f'''
import anyio, httpx2, sys
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
async def main():
    async with httpx2.AsyncClient(headers={{"Authorization": "Bearer {TOKEN_A}"}}, timeout=300) as http:
        async with Client(streamable_http_client(sys.argv[1], http_client=http), mode=sys.argv[2]) as c:
            await c.call_tool("view", {{"view": "VIEW v: quote", "at": "15:00", "data": {str(data)!r} + "|preset=pyalgotrade_trades"}})
            print("calling", flush=True)
            await c.call_tool("simulate", {{"plan": {HEAVY_PLAN!r}, "days": 25, "checkpoints": {UTC_CHECKPOINTS!r},
                                            "data": {str(data)!r} + "|preset=pyalgotrade_trades"}})
anyio.run(main)
'''
    with mcp_server(tmp_path, f"--data-root={tmp_path}", "--limit", "call_cpu_seconds=300",
                    "--limit", "call_seconds=300") as server:
        for mode in ("legacy", "auto"):
            proc = subprocess.Popen([sys.executable, "-c", script, server.url, mode], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "calling"  # data loaded
            time.sleep(0.5)
            busy = server.cpu_seconds()
            time.sleep(1.0)
            assert server.cpu_seconds() - busy > 0.2, "the call did not start"
            proc.kill()
            proc.wait(10)
            time.sleep(1.0)
            idle = server.cpu_seconds()
            time.sleep(2.0)
            spent = server.cpu_seconds() - idle
            assert spent < 0.3, f"{mode}: the server spent {spent:.2f} s of CPU after its client hung up"
        assert post(server.port, INIT, TOKEN_A)[0] == 200


async def test_a_4_mb_request_is_refused_before_it_is_read(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 8: check/format split a whole 4 MB input before the 20,000-character limit."""
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "check", "arguments": {"source": "PASS\n" * 800_000}}})
    with mcp_server(tmp_path) as server:
        started = time.monotonic()
        # the headers announce 4 MB; the answer comes before a byte of the body is sent
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKEN_A}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(head)
            reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
        assert time.monotonic() - started < 5
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:  # no length: counted as read
            s.sendall(head.replace(f"Content-Length: {len(body)}".encode(), b"Transfer-Encoding: chunked"))
            got = b""
            try:
                for i in range(0, (1 << 20) + (1 << 17), 1 << 16):  # just over the 1 MiB cap, then wait
                    piece = body[i:i + (1 << 16)].encode()
                    s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                got = s.recv(4096)
            except ConnectionResetError:
                pass
        assert got.startswith(b"HTTP/1.1 413"), got[:200]
        async with client(server.url, TOKEN_A) as c:
            with anyio.fail_after(5):
                checked = await call(c, "check", source="PASS\n" * 150_000)  # within the body, over the document
            assert checked["valid"] is False and checked["diagnostics"][0]["code"] == "too-large"
