"""Writing a command's output files: each whole, atomically, or a one-line `UsageError`; the
evidence trace as JSON lines while a run goes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kestrel.cli.errors import UsageError
from kestrel.session.options import EvidenceSink


def write_file(path: str | None, data: bytes) -> None:
    """`data` as the whole file at `path` (nothing when None), atomically: a temporary file in
    the same folder, then renamed, so a reader never sees half a file."""
    from kestrel.outputs import atomic_write

    if path is None:
        return
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


@contextmanager
def evidence_sink(path: str | None) -> Iterator[EvidenceSink | None]:
    """A sink writing each evidence record as one JSON line to `path` as it is made (None: no
    sink); a path that cannot be opened is a `UsageError`."""
    if path is None:
        yield None
        return
    from kestrel.logs import open_json_sink
    from kestrel.session.runner import evidence_logger

    try:
        ctx = open_json_sink(path, append=False)
        with ctx as log:
            yield evidence_logger(log)
    except OSError as exc:
        raise UsageError(str(exc)) from None


__all__ = ["evidence_sink", "write_file"]
