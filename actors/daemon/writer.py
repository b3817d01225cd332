"""`Writer`: the store's one writer, with group commit.

Callers `await writer.commit(ops)`; the writer task takes every batch waiting, applies them
in ONE transaction on a worker thread (`Store.write`: committed and fsynced before it
returns), then wakes each caller. So a caller resumes only once its records are durable, and
fifty sessions committing at once cost one fsync, not fifty. A failed transaction fails every
caller of that group with the error (nothing of it is committed).

Shutdown: leaving `open_writer` stops taking new batches and commits those already queued;
a transaction in flight on the worker thread always finishes (a thread is not cancelled).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.daemon.store import Op, Store


class Batch:
    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.done = anyio.Event()
        self.error: BaseException | None = None


class Writer:
    def __init__(self, store: Store, send: MemoryObjectSendStream[Batch],
                 on_commit: Callable[[Sequence[Op]], None] | None = None) -> None:
        self.store = store
        self._send = send
        self._on_commit = on_commit
        self.commits = 0
        self.batches = 0
        self.seconds = 0.0

    async def commit(self, ops: Sequence[Op]) -> None:
        """Returns once `ops` are committed (raises what the transaction raised)."""
        batch = Batch(ops)
        await self._send.send(batch)
        await batch.done.wait()
        if batch.error is not None:
            raise batch.error

    async def run(self, recv: MemoryObjectReceiveStream[Batch]) -> None:
        async with recv:
            async for first in recv:
                group = [first]
                while True:
                    try:
                        group.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await self._apply(group)

    async def _apply(self, group: list[Batch]) -> None:
        ops = [op for b in group for op in b.ops]
        error: BaseException | None = None
        start = time.perf_counter()
        try:
            await anyio.to_thread.run_sync(self.store.write, ops)
        except Exception as exc:
            error = exc
        self.seconds += time.perf_counter() - start
        self.commits += 1
        self.batches += len(group)
        if error is None and self._on_commit is not None:
            self._on_commit(ops)
        for b in group:
            b.error = error
            b.done.set()


@asynccontextmanager
async def open_writer(store: Store, on_commit: Callable[[Sequence[Op]], None] | None = None
                      ) -> AsyncIterator[Writer]:
    """A running writer over `store`; `on_commit(ops)` is called after each commit."""
    send, recv = anyio.create_memory_object_stream[Batch](1024)
    writer = Writer(store, send, on_commit)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run, recv)
        try:
            yield writer
        finally:
            send.close()  # the queued batches are still committed, then the task ends


__all__ = ["Batch", "Writer", "open_writer"]
