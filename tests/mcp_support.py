"""Helpers for the tests of `kestrel mcp` as a subprocess: a free loopback port, waiting for a
server to listen, the SDK's clients (stdio on a spawned server, streamable HTTP with a bearer
token) and a tool call's result or refusal. Every wait is bounded."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[Any], port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)


@asynccontextmanager
async def stdio_client(backend: str, mode: str, errlog: Any, *args: str) -> AsyncIterator[Client]:
    """The SDK's stdio client of a spawned `kestrel mcp --backend BACKEND ARGS` (its stderr to
    `errlog`). No env=: the SDK passes only its default variables (PATH, HOME, ...); the server
    must not need anything else."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.stdio import stdio_client as transport

    params = StdioServerParameters(command=sys.executable, args=["-m", "kestrel", "mcp", "--backend", backend, *args],
                                   cwd=str(ROOT))
    async with Client(transport(params, errlog=errlog), mode=mode) as client:
        yield client


@asynccontextmanager
async def client(url: str, token: str | None, mode: str = "legacy") -> AsyncIterator[Client]:
    """An MCP client of `url` (streamable HTTP) sending `token` as its bearer token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            yield c


async def call(c: Any, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured result (the call must succeed)."""
    result = await c.call_tool(tool, args)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def refusal(c: Any, tool: str, **args: Any) -> str:
    """A tool's error text (the call must fail)."""
    result = await c.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


__all__ = ["ROOT", "call", "client", "free_port", "refusal", "stdio_client", "wait_listening"]
