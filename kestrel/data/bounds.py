"""`ReadLimits`: what one load may read, set for the current context with `bounded_reads`.

A server that loads files for its clients sets them around each load (the readers check them
before the work each protects); with none set (the CLI, the library) files of any size are
read and messages may quote the file. A context variable: a task and the worker threads it
starts see the bounds it set, no other load does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import msgspec


class ReadLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one load may read (None: no bound). Each is checked before the work it protects."""

    max_bytes: int | None = None
    """The file's size in bytes (from the open file; a file that reads longer than it says,
    such as a /proc file, is cut off there and refused)."""
    max_rows: int | None = None
    """Data rows (Parquet: from its footer, before any column is read)."""
    max_columns: int | None = None
    """Columns of the CSV header (counted before it is split) or of the Parquet schema."""
    max_decoded_bytes: int | None = None
    """Parquet: the uncompressed bytes of the columns read (a small file may decompress to
    gigabytes)."""
    echo: bool = True
    """Whether error messages may quote the file's text (its column names, a field's value).
    A server reading files for others sets False: its refusals then name columns, lines and
    counts, never what the file holds."""


_LIMITS: ContextVar[ReadLimits] = ContextVar("kestrel_read_limits", default=ReadLimits())


@contextmanager
def bounded_reads(limits: ReadLimits) -> Iterator[None]:
    """Loads in this context (this thread, or a task and the worker threads it starts) check
    `limits`."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def read_limits() -> ReadLimits:
    """The bounds loads in the current context check."""
    return _LIMITS.get()


__all__ = ["ReadLimits", "bounded_reads", "read_limits"]
