"""The local process pool of a sweep, whose workers die with the sweep.

Invariants:
- a worker never outlives the sweep process that started it: on Linux the kernel sends it
  SIGKILL when its parent dies (`PR_SET_PDEATHSIG`, armed in the pool's initializer, then the
  parent is checked once more to close the race with a parent that died first); elsewhere a
  daemon thread polls `os.getppid()` and exits the worker when the parent is gone;
- workers ignore SIGINT: Ctrl-C at a terminal signals the whole process group, and only the
  sweep process answers it (one `kestrel: interrupted` line, exit 130); its workers then die
  with it as above;
- workers are started by `fork` on Linux (they inherit the data the parent loaded) and by
  `spawn` elsewhere, so the parent a worker sees is always the sweep process itself;
- a worker killed this way leaves at most a `.tmp-*` directory, which the next sweep removes
  (`kestrel.sweep.run.owned`); the directory lock is the parent's alone (POSIX record locks
  are not inherited across fork), so a resume right after `kill -9` of the parent works.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_INTERVAL_S = 0.2


def local_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of `jobs` worker processes bound to this process's life (module docstring)."""
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                               initializer=die_with_parent, initargs=(os.getpid(),))


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: make this worker exit when `parent_pid` (its parent) dies, and leave
    Ctrl-C to the parent (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _arm_pdeathsig():
        threading.Thread(target=_watch, args=(parent_pid,), name="kestrel-sweep-parent-watch",
                         daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


def _arm_pdeathsig() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)


__all__ = ["die_with_parent", "local_pool"]
