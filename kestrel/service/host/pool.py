"""`WorkPool`: blocking work (data loads, simulations) on a bounded set of threads of its own.

anyio's shared worker pool (40 threads) also serves the SDKs and the session machinery: work a
client can ask for never runs there, so a load that blocks (or many of them) cannot starve the
rest of the server. Invariants:
- at most `size` threads of a pool run at once, counted from start to end of each thread (a
  call that stopped waiting for its thread does not free the slot until the thread ends);
- a call waits for a free slot at most `wait_seconds`, then is refused (`PoolBusy`);
- the caller's cancellation (a deadline, a client gone) stops the wait at once; the thread is
  told through its `Budget`, which the work checks at its own safe points (`Budget.check`), so
  a simulation stops at its next ordinal;
- `Budget.check` also ends the work once it has used `cpu_seconds` of its thread's CPU time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


class PoolBusy(RuntimeError):
    """Every thread of the pool stayed busy for as long as the call could wait."""


class OverBudget(BaseException):
    """Raised inside the work when its budget is spent or its caller is gone. A BaseException:
    nothing on the way out (an agent call's fail-closed handler) may take it for an error of
    its own."""


class Budget:
    """What one piece of work may spend; shared by the caller (who cancels) and the thread."""

    def __init__(self, cpu_seconds: float | None = None) -> None:
        self.cpu_seconds = cpu_seconds
        self._stop: str | None = None
        self._start: float | None = None
        self.cpu_used = 0.0

    def begin(self) -> None:
        """Called on the work's thread when it starts (CPU time is per thread)."""
        self._start = time.thread_time()

    def cancel(self, why: str) -> None:
        if self._stop is None:
            self._stop = why

    @property
    def stopped(self) -> str | None:
        return self._stop

    def check(self) -> None:
        """Raise `OverBudget` when the caller cancelled or the CPU budget is spent."""
        if self._start is not None:
            self.cpu_used = time.thread_time() - self._start
        if self._stop is not None:
            raise OverBudget(self._stop)
        if self.cpu_seconds is not None and self.cpu_used > self.cpu_seconds:
            self._stop = f"the call used its {self.cpu_seconds:g} s of CPU time"
            raise OverBudget(self._stop)


class WorkPool:
    def __init__(self, name: str, size: int, wait_seconds: float = 30.0) -> None:
        if size < 1:
            raise ValueError(f"a work pool needs at least one thread, got {size}")
        self.name = name
        self.size = size
        self.wait_seconds = wait_seconds
        self._lock = threading.Lock()
        self._busy = 0
        self._limiter: anyio.CapacityLimiter | None = None

    @property
    def busy(self) -> int:
        """Threads of this pool running now."""
        with self._lock:
            return self._busy

    def _take(self) -> bool:
        with self._lock:
            if self._busy >= self.size:
                return False
            self._busy += 1
            return True

    def _give(self) -> None:
        with self._lock:
            self._busy -= 1

    async def run(self, fn: Callable[[Budget], T], budget: Budget | None = None) -> T:
        """`fn(budget)` on a thread of this pool (see the module docstring)."""
        budget = budget or Budget()
        with anyio.move_on_after(self.wait_seconds) as waiting:
            delay = 0.002
            while not self._take():
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.05)
        if waiting.cancelled_caught:
            raise PoolBusy(f"the server is busy ({self.size} {self.name} running for other calls): try again shortly")
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.size)

        state = {"started": False, "abandoned": False}  # guarded by self._lock

        def job() -> T:
            with self._lock:
                if state["abandoned"]:  # the caller left before this thread began: it freed the slot
                    raise OverBudget("the call was cancelled before its work began")
                state["started"] = True
            try:
                budget.begin()
                return fn(budget)
            finally:
                self._give()

        try:
            return await anyio.to_thread.run_sync(job, abandon_on_cancel=True, limiter=self._limiter)
        except BaseException:
            budget.cancel("the call was cancelled")
            with self._lock:
                never = not state["started"]
                state["abandoned"] = True
                if never:  # the worker may skip a job whose caller left: free its slot here
                    self._busy -= 1
            raise


__all__ = ["Budget", "OverBudget", "PoolBusy", "WorkPool"]
