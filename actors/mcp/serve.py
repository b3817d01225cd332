"""Serving the MCP server: a session host and the SDK's transport in one anyio run.

stdio (the default) serves one client on stdin/stdout until it disconnects; streamable HTTP
(`http_port`) serves any number of clients on 127.0.0.1 through uvicorn, which runs on asyncio
only. Leaving either ends every session of the host.
"""

from __future__ import annotations

import anyio

from actors.host import DEFAULT_ABANDON_AFTER_S, open_host
from actors.mcp.server import build_server

BACKENDS = ("asyncio", "trio")


async def serve_async(*, http_port: int | None = None,
                      abandon_after: float = DEFAULT_ABANDON_AFTER_S) -> None:
    async with open_host(abandon_after=abandon_after) as host:
        server = build_server(host)
        if http_port is None:
            await server.run_stdio_async()
        else:
            await server.run_streamable_http_async(host="127.0.0.1", port=http_port)


def serve(*, backend: str = "asyncio", http_port: int | None = None,
          abandon_after: float = DEFAULT_ABANDON_AFTER_S) -> None:
    """Run the server until its client leaves (stdio) or the process is interrupted (HTTP)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")
    if http_port is not None and backend != "asyncio":
        raise ValueError("--http serves through uvicorn, which runs on asyncio only: drop --backend trio")
    anyio.run(lambda: serve_async(http_port=http_port, abandon_after=abandon_after), backend=backend)


__all__ = ["BACKENDS", "serve", "serve_async"]
