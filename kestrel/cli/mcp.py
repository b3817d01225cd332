"""`kestrel mcp`: the MCP server (stdio by default, `--http PORT` for streamable HTTP)."""

from __future__ import annotations

import argparse
import math
import sys

from kestrel.cli.subcommands import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser(
        "mcp",
        help="serve Kestrel to MCP clients (check, panes, view, simulate, and sessions the client authors)",
        description=(
            "Run the Kestrel MCP server over stdio (register `kestrel mcp` with an MCP client) or "
            "streamable HTTP on 127.0.0.1 (--http PORT). The client can check and format plans, "
            "read panes, simulate a plan, and be the agent of sessions (session_start/_submit)."
        ),
    )
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio",
                   help="anyio backend (default asyncio)")
    p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    p.add_argument("--abandon-after", type=float, default=600.0, metavar="S",
                   help="a session with no session_submit for S seconds stands down fail-closed (default 600)")
    p.set_defaults(func=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    from kestrel.logs import configure_console

    configure_console(level="warning")  # stderr: stdout carries the protocol
    if args.http is not None and not 0 < args.http < 65536:
        return _usage(f"--http must be a port 1..65535, got {args.http}")
    if not (args.abandon_after > 0 and not math.isnan(args.abandon_after)):
        return _usage(f"--abandon-after must be > 0 seconds, got {args.abandon_after}")
    try:
        from kestrel.service.mcp import serve
    except ImportError as exc:
        return _usage(f"the MCP server needs the `mcp` extra ({exc}): pip install 'kestrel[mcp]'")
    try:
        serve(backend=args.backend, http_port=args.http, abandon_after=args.abandon_after)
    except ValueError as exc:
        return _usage(str(exc))
    return 0


def _usage(message: str) -> int:
    print(f"kestrel mcp: {message}", file=sys.stderr)
    return 2


__all__ = ["register"]
