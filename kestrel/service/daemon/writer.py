"""`Writer`: the store's one writer, with group commit.

`await writer.commit(ops)` returns once `ops` are committed; `await writer.enqueue(ops)` only
queues them (it waits when the queue is full: backpressure, never unbounded memory) and
returns the `Batch` to `wait` on later. The writer task takes every batch waiting (a queued
batch lingers at most `linger` seconds, 20 ms by default, for company; one somebody waits
for goes at once, with everything queued before it), applies them in ONE transaction on a worker thread (`Store.write`: committed and fsynced before it
returns), then wakes each waiter. Batches are committed in the order they were queued, so
the store always holds a prefix of what was queued, and fifty sessions committing at once
cost one fsync, not fifty. A failed transaction fails every batch of that group (nothing of
it is committed): their waiters get the error, and `on_error(ops, error)` hears of it.

A store that fails for a reason that may pass (a full disk, an I/O error, a lock:
`kestrel.service.daemon.store.transient`) pauses the writer instead: the same transaction is
tried again, every `retry` seconds (doubling up to 5 s), until it commits; meanwhile `paused`
names the error, batches queue behind it and, once the queue is full, the sessions that
enqueue wait (backpressure): runs pause until space returns and lose nothing. Once the writer
is stopping, a transient failure fails its group like any other (the runs stay unfinished in
the store and resume on the next start).

Shutdown: leaving `open_writer` stops taking new batches and commits those already queued;
a transaction in flight on the worker thread always finishes (a thread is not cancelled).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from kestrel.logs import get_logger
from kestrel.service.daemon.store import Op, Store, transient


LINGER_S = 0.02
"""How long a queued (not awaited) batch may wait for others before it is committed."""
GROUP_MAX = 512


class Batch:
    def __init__(self, ops: Sequence[Op], urgent: bool = False) -> None:
        self.ops = ops
        self.urgent = urgent
        self.done = anyio.Event()
        self.error: BaseException | None = None


class Writer:
    def __init__(self, store: Store, send: MemoryObjectSendStream[Batch],
                 on_commit: Callable[[Sequence[Op]], None] | None = None,
                 on_error: Callable[[Sequence[Op], BaseException], None] | None = None,
                 linger: float = LINGER_S, retry: float = 0.25) -> None:
        self.store = store
        self.linger = linger
        self.retry = retry
        self.paused: str | None = None
        """The error the writer is waiting out (None: committing normally)."""
        self.stopping = False
        self._send = send
        self._on_commit = on_commit
        self._on_error = on_error
        self.commits = 0
        self.batches = 0
        self.seconds = 0.0

    async def commit(self, ops: Sequence[Op]) -> None:
        """Returns once `ops` are committed (raises what the transaction raised)."""
        await self.wait(await self.enqueue(ops, urgent=True))

    async def enqueue(self, ops: Sequence[Op], urgent: bool = False) -> Batch:
        """Queue `ops` for a commit (after everything queued before): within `linger`
        seconds, or at once when `urgent`."""
        batch = Batch(ops, urgent)
        await self._send.send(batch)
        return batch

    @staticmethod
    async def wait(batch: Batch) -> None:
        """Returns once `batch` is committed (raises what its transaction raised)."""
        await batch.done.wait()
        if batch.error is not None:
            raise batch.error

    async def run(self, recv: MemoryObjectReceiveStream[Batch]) -> None:
        async with recv:
            async for first in recv:
                group = [first]
                if not first.urgent:
                    with anyio.move_on_after(self.linger):
                        while not group[-1].urgent and len(group) < GROUP_MAX:
                            try:
                                group.append(await recv.receive())
                            except anyio.EndOfStream:
                                break
                while len(group) < GROUP_MAX:
                    try:
                        group.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await self._apply(group)

    async def _apply(self, group: list[Batch]) -> None:
        ops = [op for b in group for op in b.ops]
        error: BaseException | None = None
        start = time.perf_counter()
        delay = self.retry
        while True:
            try:
                await anyio.to_thread.run_sync(self.store.write, ops)
                error = None
            except Exception as exc:
                error = exc
            if error is None or not transient(error) or self.stopping:
                break
            if self.paused is None:
                get_logger("kestrel.service.daemon").warning(
                    "store.paused", error=str(error), waiting=len(group), note="retrying until it commits")
            self.paused = str(error)
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)
        if self.paused is not None and error is None:
            get_logger("kestrel.service.daemon").info("store.resumed", was=self.paused)
        self.paused = None
        self.seconds += time.perf_counter() - start
        self.commits += 1
        self.batches += len(group)
        if error is None and self._on_commit is not None:
            self._on_commit(ops)
        if error is not None and self._on_error is not None:
            self._on_error(ops, error)
        for b in group:
            b.error = error
            b.done.set()


@asynccontextmanager
async def open_writer(store: Store, on_commit: Callable[[Sequence[Op]], None] | None = None,
                      on_error: Callable[[Sequence[Op], BaseException], None] | None = None,
                      capacity: int = 1024, linger: float = LINGER_S) -> AsyncIterator[Writer]:
    """A running writer over `store`; `on_commit(ops)` is called after each commit,
    `on_error(ops, error)` after a failed one; at most `capacity` batches wait; a batch
    nobody waits for lingers at most `linger` seconds."""
    send, recv = anyio.create_memory_object_stream[Batch](capacity)
    writer = Writer(store, send, on_commit, on_error, linger)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run, recv)
        try:
            yield writer
        finally:
            writer.stopping = True  # a paused commit gives up: its runs resume on the next start
            send.close()  # the queued batches are still committed, then the task ends


__all__ = ["GROUP_MAX", "LINGER_S", "Batch", "Writer", "open_writer"]
