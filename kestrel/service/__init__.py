"""Kestrel's asynchronous side, on the `kestrel_actors` runtime (anyio: asyncio and trio).

- `actors`: the agent, driver, engine and feed actors that drive the pure core;
- `host`: the session host, many sessions at once (MCP and the daemon both serve it);
- `mcp`: the MCP server over the host;
- `daemon`: the control socket and protocol, the SQLite store and crash recovery.
"""
