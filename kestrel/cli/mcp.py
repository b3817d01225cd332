"""`kestrel mcp`: the MCP server (stdio by default, `--http PORT` for streamable HTTP)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from kestrel.cli.subcommands import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser(
        "mcp",
        help="serve Kestrel to MCP clients (check, panes, view, simulate, and sessions the client authors)",
        description=(
            "Run the Kestrel MCP server over stdio (register `kestrel mcp` with an MCP client) or "
            "streamable HTTP on 127.0.0.1 (--http PORT, bearer token required). The client can check "
            "and format plans, read panes, simulate a plan, and be the agent of sessions "
            "(session_start/_submit). Data files are read only under the --data-root folders."
        ),
    )
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio",
                   help="anyio backend (default asyncio)")
    p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    p.add_argument("--abandon-after", type=float, default=600.0, metavar="S",
                   help="a session with no session_submit for S seconds stands down fail-closed (default 600)")
    p.add_argument("--data-root", action="append", default=[], metavar="DIR",
                   help="serve the data files under DIR (repeatable; default: none, only the bundled sample)")
    p.add_argument("--token-file", metavar="PATH",
                   help="with --http: the bearer tokens (one per line, owner-only); created with a new "
                        "token when absent (default: a token generated at start and printed once)")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help="change one of the server's limits (docs/mcp.md lists them with their defaults), "
                        "e.g. --limit call_seconds=120 (repeatable)")
    p.set_defaults(func=_mcp)


def parse_limits(items: list[str]) -> Any:
    """`NAME=VALUE` items over the default `ServiceLimits` (ValueError naming a bad one)."""
    import msgspec

    from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits

    fields = {f.name: f.type for f in msgspec.structs.fields(ServiceLimits)}
    changes: dict[str, Any] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not eq or name not in fields:
            raise ValueError(f"--limit {item!r}: give NAME=VALUE with NAME one of {', '.join(sorted(fields))}")
        kind = fields[name]
        try:
            value: float = int(text) if kind is int else float(text)
        except ValueError:
            raise ValueError(f"--limit {name}: expected {'a whole number' if kind is int else 'a number'}, "
                             f"got {text!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"--limit {name} must be > 0, got {text}")
        changes[name] = value
    return msgspec.structs.replace(DEFAULT_LIMITS, **changes)


def _tokens(args: argparse.Namespace) -> tuple[dict[str, str], str | None]:
    """(token -> label, a line to print once) for --http."""
    from kestrel.service.mcp.http import create_token_file, load_tokens, new_token

    if args.token_file:
        path = Path(args.token_file).expanduser()
        if path.exists() or path.is_symlink():
            return load_tokens(path), None
        create_token_file(path)
        return load_tokens(path), f"kestrel mcp: wrote a new bearer token to {path} (mode 0600)"
    token = new_token()
    return {token: "token 1"}, (f"kestrel mcp: bearer token (send `Authorization: Bearer TOKEN`; shown once, "
                                f"--token-file PATH keeps one): {token}")


def _mcp(args: argparse.Namespace) -> int:
    from kestrel.logs import configure_console

    configure_console(level="warning")  # stderr: stdout carries the protocol
    if args.http is not None and not 0 < args.http < 65536:
        return _usage(f"--http must be a port 1..65535, got {args.http}")
    if not (args.abandon_after > 0 and not math.isnan(args.abandon_after)):
        return _usage(f"--abandon-after must be > 0 seconds, got {args.abandon_after}")
    if args.token_file and args.http is None:
        return _usage("--token-file applies to --http only (stdio serves the one client that started it)")
    try:
        from kestrel.service.mcp import serve
    except ImportError as exc:
        return _usage(f"the MCP server needs the `mcp` extra ({exc}): pip install 'kestrel[mcp]'")
    from kestrel.service.host.roots import DataRoots

    try:
        roots = DataRoots.of(args.data_root)
        limits = parse_limits(args.limit)
        tokens, note = _tokens(args) if args.http is not None else (None, None)
    except ValueError as exc:
        return _usage(str(exc))
    try:
        serve(backend=args.backend, http_port=args.http, abandon_after=args.abandon_after, roots=roots,
              limits=limits, tokens=tokens, announce=note)
    except ValueError as exc:
        return _usage(str(exc))
    return 0


def _usage(message: str) -> int:
    from kestrel.terminal import printable

    print(f"kestrel mcp: {printable(message)}", file=sys.stderr)
    return 2


__all__ = ["parse_limits", "register"]
