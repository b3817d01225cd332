"""The daemon: the session host behind an owner-only Unix socket, runs kept in the store.

`serve_daemon` (async) runs until SIGTERM/SIGINT or a `shutdown` request: it opens the store
(integrity check, migrations), the group-commit writer, a session host whose observer commits
every turn and ledger event (`kestrel.service.daemon.runs`), resumes the runs a previous daemon left
unfinished, then serves `HOME/kestrel.sock`. Shutdown: the socket stops accepting and is
removed, the runs' sessions are stopped, commits in flight finish; unfinished runs stay
`running` in the store and resume on the next start.

Connections: the peer's uid (`SO_PEERCRED`) must be the allowed one (the daemon's owner),
else the peer gets one error line and the connection is closed. Each line is one request
(`kestrel.service.daemon.protocol`), answered in order; the first must be `hello`. Bad JSON (also an empty
line or one nested too deeply), a bad request, an unknown method or bad params get a JSON error and the connection stays open; a
line over 1 MiB gets an error and the connection is closed. No failure of a request ends the
daemon or reaches the peer as a traceback (an unexpected one is logged as one line and
answered as an internal error).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from kestrel.service.daemon.home import Home, remove_stale_socket
from kestrel.service.daemon.runs import Planner, Refusal, Runs
from kestrel.service.daemon.store import Store
from kestrel.service.daemon.writer import open_writer
from kestrel_actors.errors import describe
from kestrel.service.host import open_host
from kestrel import __version__
from kestrel.service.daemon.protocol import (
    INTERNAL_ERROR,
    MAX_LINE,
    PROTOCOL_VERSION,
    REFUSED,
    TIMED_OUT,
    Exported,
    Failure,
    FollowItem,
    HelloParams,
    HelloResult,
    Notification,
    Ok,
    Params,
    ProtocolError,
    Request,
    Response,
    RunList,
    RunParams,
    SubmitParams,
    WaitParams,
    decode_request,
    encode,
    encode_lines,
    error,
)
from kestrel.logs import get_logger

Send = Callable[[Notification], Awaitable[None]]


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (`SO_PEERCRED`)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


class Daemon:
    def __init__(self, home: Home, runs: Runs, stop: anyio.Event, allowed_uid: int) -> None:
        self.home = home
        self.runs = runs
        self.stop = stop
        self.allowed_uid = allowed_uid
        self.log = get_logger("kestrel.service.daemon")

    async def handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                await self._converse(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                pass  # the peer went away: nothing to answer
            except Exception as exc:  # never let a connection take the daemon down
                self.log.error("connection.failed", error=describe(exc))

    async def _converse(self, stream: SocketStream) -> None:
        uid = peer_uid(stream.extra(SocketAttribute.raw_socket))
        if uid != self.allowed_uid:
            self.log.warning("connection.refused", peer_uid=uid)
            await stream.send(encode(error(None, REFUSED, f"refused: peer uid {uid} is not the daemon's owner")))
            return
        reader = BufferedByteReceiveStream(stream)
        greeted = False
        while True:
            try:
                line = await reader.receive_until(b"\n", MAX_LINE)
            except anyio.DelimiterNotFound:
                line = b"x" * MAX_LINE  # over the cap with no newline in sight
            except anyio.IncompleteRead:
                return
            if len(line) + 1 > MAX_LINE:  # exact: receive_until only checks the cap per chunk
                await stream.send(encode(error(None, -32600, f"line over {MAX_LINE} bytes: closing the connection")))
                return
            try:
                req, params = decode_request(line)
            except ProtocolError as exc:
                await stream.send(encode(error(exc.request_id, exc.code, str(exc))))
                continue
            if not greeted and req.method != "hello":
                await stream.send(encode(error(req.id, -32600, "say hello first: {\"method\": \"hello\", \"params\": {\"protocol\": 1}}")))
                continue
            if req.method == "hello":
                assert isinstance(params, HelloParams)
                if params.protocol != PROTOCOL_VERSION:
                    await stream.send(encode(error(req.id, REFUSED, f"protocol {params.protocol} is not spoken here: this daemon speaks {PROTOCOL_VERSION}")))
                    return
                greeted = True
            async def send(message: Notification, rid: int | str | None = req.id) -> None:
                for part in encode_lines(message, rid):
                    await stream.send(part)

            response = await self._answer(req, params, send)
            for part in encode_lines(response, req.id):
                await stream.send(part)
            if req.method == "shutdown":
                self.stop.set()

    async def _answer(self, req: Request, params: Params, send: Send) -> Response | Failure:
        try:
            result = await self._call(req.method, params, send)
        except Refusal as exc:
            return error(req.id, REFUSED, str(exc))
        except TimeoutError as exc:
            return error(req.id, TIMED_OUT, str(exc))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise
        except Exception as exc:
            self.log.error("request.failed", method=req.method, error=describe(exc))
            return error(req.id, INTERNAL_ERROR, f"internal error: {describe(exc)}")
        return Response(req.id, msgspec.to_builtins(result))

    async def _call(self, method: str, params: Params, send: Send) -> Any:
        runs = self.runs
        if method == "hello":
            return HelloResult(PROTOCOL_VERSION, f"kestrel {__version__}", os.getpid(), str(self.home.root))
        if method == "ping":
            return Ok(True, "pong")
        if method == "submit":
            assert isinstance(params, SubmitParams)
            return await runs.submit(params.argv, params.cwd)
        if method == "runs":
            return RunList(runs.reader.runs())
        if method == "shutdown":
            return Ok(True, "shutting down")
        if isinstance(params, WaitParams):
            if params.timeout is not None and not params.timeout >= 0:
                raise Refusal(f"timeout must be >= 0 seconds, got {params.timeout}")
            info = await runs.wait(params.run, params.timeout)
            if info is None:
                raise TimeoutError(f"run {params.run} is still running after {params.timeout:g} s")
            return info
        assert isinstance(params, RunParams)
        if method == "show":
            return runs.info(params.run)
        if method == "cancel":
            return await runs.cancel(params.run)
        if method == "export":
            ledger, capture, evidence = runs.export(params.run)
            return Exported(params.run, ledger.decode(), capture.decode(), evidence.decode())
        return await self._follow(params.run, send)

    async def _follow(self, run: str, send: Send) -> Any:
        runs = self.runs
        runs.info(run)  # refuse an unknown run before streaming
        last = 0
        while True:
            live = runs.live.get(run)
            changed = None if live is None else live.changed  # taken before reading: no lost wake-up
            rows = runs.reader.events(run, after=last, limit=1000)
            for rowid, kind, key, body in rows:
                last = rowid
                item = FollowItem(run, kind, key, msgspec.json.decode(body))
                await send(Notification("event", msgspec.to_builtins(item)))
                if kind == "end":
                    return runs.info(run)
            if rows:
                continue
            if changed is None:
                return runs.info(run)
            await changed.wait()


async def serve_daemon(
    home: Home,
    planner: Planner,
    *,
    allowed_uid: int | None = None,
    stop: anyio.Event | None = None,
    signals: bool = True,
    task_status: TaskStatus[Daemon] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run the daemon on `home` (whose lock the caller holds) until stopped (module docstring)."""
    log = get_logger("kestrel.service.daemon")
    stop = stop or anyio.Event()
    key = home.read_key()
    store = await anyio.to_thread.run_sync(lambda: Store(home.db, key=key))
    reader = store.reader()
    holder: list[Runs] = []

    def woke(ops: Any) -> None:
        if holder:
            holder[0].on_commit(ops)

    def failed(ops: Any, error: BaseException) -> None:
        if holder:
            holder[0].on_error(ops, error)

    async def observe(session_id: str, event: Any) -> None:
        await holder[0].observe(session_id, event)

    try:
        async with open_writer(store, woke, failed) as writer, open_host(observer=observe, abandon_after=float("inf")) as host:
            async with anyio.create_task_group() as runs_tg:
                if signals:  # from the start: a SIGTERM while resuming still stops cleanly
                    runs_tg.start_soon(_watch_signals, stop)
                runs = Runs(host, writer, reader, planner, runs_tg)
                holder.append(runs)
                resumed = await runs.resume_all()
                remove_stale_socket(home)
                old = os.umask(0o177)
                try:
                    listener = await anyio.create_unix_listener(home.socket)
                finally:
                    os.umask(old)
                os.chmod(home.socket, 0o600)
                daemon = Daemon(home, runs, stop, os.getuid() if allowed_uid is None else allowed_uid)
                log.info("daemon.started", home=str(home.root), pid=os.getpid(), resumed=resumed,
                         backend=anyio_backend())
                task_status.started(daemon)
                async with anyio.create_task_group() as tg:
                    accepting = anyio.CancelScope()
                    tg.start_soon(_accept, listener, daemon, tg, accepting)
                    await stop.wait()
                    log.info("daemon.stopping")
                    accepting.cancel()  # stop accepting first
                    await listener.aclose()
                    remove_stale_socket(home)
                    tg.cancel_scope.cancel()
                runs_tg.cancel_scope.cancel()
    finally:
        reader.close()
        store.close()
    log.info("daemon.stopped")


async def _accept(listener: Any, daemon: Daemon, tg: anyio.abc.TaskGroup, scope: anyio.CancelScope) -> None:
    with scope:
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:  # e.g. out of descriptors: log, breathe, go on
                get_logger("kestrel.service.daemon").error("accept.failed", error=describe(exc))
                await anyio.sleep(0.1)
                continue
            tg.start_soon(daemon.handle, stream)


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        async for signum in received:
            get_logger("kestrel.service.daemon").info("daemon.signal", signal=signal.Signals(signum).name)
            stop.set()
            return


def anyio_backend() -> str:
    import sniffio

    return sniffio.current_async_library()


__all__ = ["Daemon", "peer_uid", "serve_daemon"]
