"""Helpers for the daemon tests: an in-process daemon, an async line client, and a `kestrel
daemon` subprocess (`DaemonProcess`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
from kestrel.cli.ctl import Client, NoDaemon

ROOT = Path(__file__).resolve().parent.parent


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


class DaemonProcess:
    """A `kestrel daemon` subprocess on `home` (`extra`: more daemon flags; `backend` its
    `--backend`, `roots` its `--data-root` folders, `env` its environment), its output in
    `out` next to the home."""

    def __init__(self, home: Path, *extra: str, backend: str | None = None, roots: tuple[Path, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.home = home
        self.extra = (*(("--backend", backend) if backend is not None else ()),
                      *(f"--data-root={r}" for r in roots), *extra)
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.out = home.parent / f"{home.name}-daemon.out"

    def start(self, timeout: float = 30.0) -> None:
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "kestrel", "daemon", "--home", str(self.home),
                                          *self.extra], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                         env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.out.read_text(errors="replace")
            try:
                with Client(self.home / "kestrel.sock", timeout=5):
                    return
            except (NoDaemon, OSError):
                time.sleep(0.05)
        raise AssertionError(f"the daemon did not answer within {timeout}s:\n{self.out.read_text(errors='replace')}")

    def client(self, timeout: float = 60) -> Client:
        return Client(self.home / "kestrel.sock", timeout=timeout)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


__all__ = ["ROOT", "Conn", "DaemonProcess", "running_daemon", "submit_params"]
