"""A reader that goes away: `kestrel ... | head` ends the command quietly, exit 0.

When the process writing to a pipe outlives its reader, every later write fails with EPIPE
(Python ignores SIGPIPE, so it is a `BrokenPipeError`). Left alone, that error surfaces in
whatever code was writing: a subcommand's `except OSError` prints "Broken pipe", rich's
console exits 1, the interpreter's last flush prints "Exception ignored". So the program's
standard output is wrapped once (`guard_stdout`, by `kestrel.cli.main` when it is the
`kestrel` program): a write or flush that meets EPIPE raises `ReaderGone`, which is no
`OSError` (no handler mistakes it for a failed file or socket) and which `main` ends quietly
(`reader_gone`): standard output is pointed at /dev/null, so nothing buffered can fail again
at exit. SIGPIPE stays ignored: the daemon's and the client's sockets keep their errors.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class ReaderGone(Exception):
    """Standard output's reader closed the pipe (EPIPE on a write or a flush)."""


class GuardedStdout:
    """`stream` with EPIPE on `write`, `writelines` and `flush` raised as `ReaderGone`;
    everything else (`isatty`, `fileno`, `encoding`, `buffer`, ...) is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise ReaderGone() from None

    def writelines(self, lines: Any) -> None:
        try:
            self._stream.writelines(lines)
        except BrokenPipeError:
            raise ReaderGone() from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ReaderGone() from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Wrap `sys.stdout` (once) so that EPIPE raises `ReaderGone`."""
    if not isinstance(sys.stdout, GuardedStdout) and sys.stdout is not None:
        sys.stdout = GuardedStdout(sys.stdout)


def reader_gone() -> int:
    """End quietly after the reader went away: standard output goes to /dev/null (what is still
    buffered is dropped there), exit code 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 0


__all__ = ["GuardedStdout", "ReaderGone", "guard_stdout", "reader_gone"]
