"""Ctrl-C in the `kestrel` program: one line on stderr, exit 130, at once.

Installed by `kestrel/__init__.py` as the first thing the program runs (only when the process
is the `kestrel` program: `kestrel ...` or `python -m kestrel ...`; the library and in-process
callers of `kestrel.cli.main(argv)` keep Python's KeyboardInterrupt). Whatever runs when the
signal comes (imports, loading, an event loop on asyncio or trio, worker threads), the process
prints `kestrel: interrupted` and ends with 130: no traceback, no exception a task group could
wrap or a loop could swallow, no wait for threads, so it never hangs. Nothing is lost by not
unwinding: captures and evidence are flushed per turn/record as the run goes, and whole files
are written to a temporary file then renamed (an unfinished temporary file is removed here).
Uses the builtin `_signal` module: importing `signal` costs an `enum` import, time during which
a Ctrl-C would still get Python's default treatment.
"""

from __future__ import annotations

import _signal
import os
import sys
from types import FrameType

INTERRUPTED = 130  # 128 + SIGINT


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    discard = getattr(sys.modules.get("kestrel.outputs"), "discard_partial_writes", None)
    if discard is not None:  # (None while that module is still being imported)
        discard()
    os.write(2, b"kestrel: interrupted\n")
    os._exit(INTERRUPTED)


def launched_as_program() -> bool:
    """The process is `kestrel ...` (console script) or `python -m kestrel ...`."""
    arg0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(arg0) == "kestrel" or arg0.endswith(os.path.join("kestrel", "__main__.py")):
        return True
    orig = getattr(sys, "orig_argv", [])
    return "-m" in orig[:-1] and orig[orig.index("-m") + 1] == "kestrel"


def install() -> None:
    _signal.signal(_signal.SIGINT, on_interrupt)


def install_if_program() -> None:
    if launched_as_program():
        install()
