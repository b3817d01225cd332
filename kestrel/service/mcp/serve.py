"""Serving the MCP server: a session host and the SDK's transport in one anyio run.

stdio (the default) serves one client on stdin/stdout until it disconnects. Streamable HTTP
(`http_port`) serves any number of clients on 127.0.0.1 at `/mcp`: the SDK's ASGI app, in
stateless mode (no transport sessions to fill or to expire: Kestrel's own sessions carry the
state, owned by the client's token), behind the `FrontDoor` (bearer tokens, request bounds,
hang-up detection), under hypercorn, whose asyncio and trio workers let it run on either
backend. Leaving either ends every session of the host. The HTTP server raises its open-file
limit to the hard limit (at most 65536), so a flood of connections meets the request cap and
the timeouts before it meets the descriptor limit.
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
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits
from kestrel.service.host.roots import DataRoots
from kestrel.service.mcp.http import FrontDoor
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


def raise_open_files(cap: int = 65536) -> int:
    """Raise this process's open-file limit to its hard limit (at most `cap`); the new limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            return want
        except (ValueError, OSError):
            pass
    return soft


async def _serve_http(app: Any, sock: socket.socket, backend: str, limits: ServiceLimits = DEFAULT_LIMITS) -> None:
    """Serve `app` on the bound `sock` (hypercorn takes it over) until cancelled. No shutdown
    trigger of hypercorn's: it would trap SIGINT on asyncio only, where the CLI's handler
    ends the process with 130 on both backends."""
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = None  # failures reach the client as tool errors, never as tracebacks here
    config.keep_alive_timeout = limits.idle_seconds  # also bounds request headers still coming in
    config.backlog = 256
    if backend == "trio":
        from hypercorn.trio import serve as serve_trio

        await serve_trio(app, config, mode="asgi", shutdown_trigger=anyio.sleep_forever)
    else:
        from hypercorn.asyncio import serve as serve_asyncio

        await serve_asyncio(app, config, mode="asgi", shutdown_trigger=anyio.sleep_forever)


def http_app(server: Any, tokens: dict[str, str], limits: ServiceLimits = DEFAULT_LIMITS) -> FrontDoor:
    """The SDK's streamable HTTP app (stateless, its body limit ours) behind the front door."""
    inner = server.streamable_http_app(host="127.0.0.1", stateless_http=True,
                                       max_request_body_size=limits.max_body_bytes)
    return FrontDoor(inner, tokens, limits)


async def serve_async(*, http_port: int | None = None, backend: str = "asyncio",
                      abandon_after: float = DEFAULT_ABANDON_AFTER_S, roots: DataRoots | None = None,
                      limits: ServiceLimits = DEFAULT_LIMITS, tokens: dict[str, str] | None = None,
                      announce: str | None = None) -> None:
    """Serve until the stdio client leaves or the HTTP server is cancelled; `backend` names
    the running anyio backend (it picks hypercorn's worker); `tokens` (token -> label) are the
    HTTP clients' credentials (required with `http_port`); `announce` is printed on stderr
    once the port is bound."""
    if http_port is not None and not tokens:
        raise ValueError("the HTTP server needs a bearer token")
    sock = None if http_port is None else listening_socket(http_port)  # a taken port fails first
    if announce is not None:
        print(announce, file=sys.stderr, flush=True)
    try:
        async with open_host(abandon_after=abandon_after, limits=limits) as host:
            server = build_server(host, roots=roots, limits=limits)
            if sock is None:
                await server.run_stdio_async()
            else:
                raise_open_files()
                await _serve_http(http_app(server, tokens or {}, limits), sock, backend, limits)
    finally:
        if sock is not None:
            sock.close()  # (a no-op once hypercorn took it over)


def serve(*, backend: str = "asyncio", http_port: int | None = None,
          abandon_after: float = DEFAULT_ABANDON_AFTER_S, roots: DataRoots | None = None,
          limits: ServiceLimits = DEFAULT_LIMITS, tokens: dict[str, str] | None = None,
          announce: str | None = None) -> None:
    """Run the server until its client leaves (stdio) or the process is interrupted (HTTP).
    Raises ValueError (`PortInUse` for an `http_port` that cannot be listened on) before serving."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")
    one_line_logging()
    anyio.run(lambda: serve_async(http_port=http_port, backend=backend, abandon_after=abandon_after,
                                  roots=roots, limits=limits, tokens=tokens, announce=announce),
              backend=backend)


__all__ = ["BACKENDS", "OneLine", "PortInUse", "http_app", "listening_socket", "one_line_logging",
           "raise_open_files", "serve", "serve_async"]
