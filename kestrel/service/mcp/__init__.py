"""Kestrel's MCP server (official `mcp` SDK, extra `kestrel[mcp]`) over the session host:
`build_server(host)` and `serve(...)` (stdio, or streamable HTTP on 127.0.0.1). See docs/mcp.md."""

from kestrel.service.mcp.serve import serve, serve_async
from kestrel.service.mcp.server import MAX_REPLY_CHARS, MAX_TOKENS_PER_CALL, build_server, language_card

__all__ = ["MAX_REPLY_CHARS", "MAX_TOKENS_PER_CALL", "build_server", "language_card", "serve", "serve_async"]
