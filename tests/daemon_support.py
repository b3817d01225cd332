"""Helpers for the daemon tests: an in-process daemon and an async line client."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from kestrel.service.daemon import Daemon, Home, Lock, Planner, serve_daemon
from kestrel.cli.daemon import SimulatePlanner
from kestrel.service.daemon.protocol import MAX_LINE, PROTOCOL_VERSION


@asynccontextmanager
async def running_daemon(root: Path, planner: Planner | None = None, allowed_uid: int | None = None
                         ) -> AsyncIterator[tuple[Daemon, anyio.Event]]:
    home = Home(root)
    home.prepare()
    lock = Lock(home)
    lock.acquire()
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            daemon = await tg.start(partial(serve_daemon, home, planner or SimulatePlanner(),
                                            allowed_uid=allowed_uid, stop=stop, signals=False))
            yield daemon, stop
            stop.set()
    finally:
        lock.release()


class Conn:
    """One raw connection: send lines, read JSON lines."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self.ids = 0

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path, hello: bool = True) -> AsyncIterator[Conn]:
        stream = await anyio.connect_unix(path)
        async with stream:
            conn = cls(stream)
            if hello:
                reply = await conn.call("hello", {"protocol": PROTOCOL_VERSION})
                assert reply["result"]["protocol"] == PROTOCOL_VERSION
            yield conn

    async def send(self, raw: bytes) -> None:
        await self.stream.send(raw)

    async def line(self) -> dict[str, Any] | None:
        """The next JSON line, or None once the daemon closed the connection."""
        try:
            raw = await self.reader.receive_until(b"\n", MAX_LINE)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
            return None
        doc: dict[str, Any] = json.loads(raw)
        return doc

    async def call(self, method: str, params: dict[str, Any] | None = None,
                   events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params or {}}
        await self.send(json.dumps(body).encode() + b"\n")
        while True:
            msg = await self.line()
            assert msg is not None, f"{method}: the daemon closed the connection"
            if "id" not in msg:
                assert events is not None, f"unexpected notification {msg}"
                events.append(msg["params"])
                continue
            assert msg["id"] == self.ids
            return msg

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        reply = await self.call(method, params)
        assert "result" in reply, reply
        return reply["result"]


def submit_params(*flags: str) -> dict[str, Any]:
    return {"argv": list(flags), "cwd": os.getcwd()}


__all__ = ["Conn", "running_daemon", "submit_params"]
