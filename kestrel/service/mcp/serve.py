"""Serving the MCP server: a session host and the SDK's transport in one anyio run.

stdio (the default) serves one client on stdin/stdout until it disconnects. Streamable HTTP
(`http_port`) serves any number of clients on 127.0.0.1 at `/mcp`: the SDK's ASGI app under
hypercorn, whose asyncio and trio workers let it run on either backend. Leaving either ends
every session of the host.
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
from typing import Any

import anyio

from kestrel_actors.errors import describe
from kestrel.service.host import DEFAULT_ABANDON_AFTER_S, open_host
from kestrel.service.mcp.server import build_server

BACKENDS = ("asyncio", "trio")


class OneLine(logging.Formatter):
    """`level logger: message[: ExceptionType: text]` on one line: never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{text}: {describe(record.exc_info[1])}"
        return f"{record.levelname.lower()} {record.name}: {' '.join(text.split())}"


def one_line_logging(level: int = logging.WARNING) -> None:
    """Process-wide stdlib logging (the SDK's, hypercorn's) as one line per record on stderr
    (stdout carries the protocol). Set before the server is built, so the SDK keeps it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    logging.basicConfig(level=level, handlers=[handler], force=True)


class PortInUse(ValueError):
    """The `--http` port cannot be listened on (a user error: exit 2 at the CLI)."""


def listening_socket(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:`port` (as hypercorn binds one), or `PortInUse`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} is in use on 127.0.0.1: pick another --http port") from None
        raise PortInUse(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): pick another --http port") from None
    return sock


async def _serve_http(app: Any, sock: socket.socket, backend: str) -> None:
    """Serve `app` on the bound `sock` (hypercorn takes it over) until cancelled. No shutdown
    trigger of hypercorn's: it would trap SIGINT on asyncio only, where the CLI's handler
    ends the process with 130 on both backends."""
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = None  # failures reach the client as tool errors, never as tracebacks here
    if backend == "trio":
        from hypercorn.trio import serve as serve_trio

        await serve_trio(app, config, mode="asgi", shutdown_trigger=anyio.sleep_forever)
    else:
        from hypercorn.asyncio import serve as serve_asyncio

        await serve_asyncio(app, config, mode="asgi", shutdown_trigger=anyio.sleep_forever)


async def serve_async(*, http_port: int | None = None, backend: str = "asyncio",
                      abandon_after: float = DEFAULT_ABANDON_AFTER_S) -> None:
    """Serve until the stdio client leaves or the HTTP server is cancelled; `backend` names
    the running anyio backend (it picks hypercorn's worker)."""
    sock = None if http_port is None else listening_socket(http_port)  # a taken port fails first
    try:
        async with open_host(abandon_after=abandon_after) as host:
            server = build_server(host)
            if sock is None:
                await server.run_stdio_async()
            else:
                await _serve_http(server.streamable_http_app(host="127.0.0.1"), sock, backend)
    finally:
        if sock is not None:
            sock.close()  # (a no-op once hypercorn took it over)


def serve(*, backend: str = "asyncio", http_port: int | None = None,
          abandon_after: float = DEFAULT_ABANDON_AFTER_S) -> None:
    """Run the server until its client leaves (stdio) or the process is interrupted (HTTP).
    Raises ValueError (`PortInUse` for an `http_port` that cannot be listened on) before serving."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")
    one_line_logging()
    anyio.run(lambda: serve_async(http_port=http_port, backend=backend, abandon_after=abandon_after),
              backend=backend)


__all__ = ["BACKENDS", "OneLine", "PortInUse", "listening_socket", "one_line_logging", "serve", "serve_async"]
