"""Writing a command's output files: each whole, atomically, or a one-line `UsageError`."""

from __future__ import annotations

from kestrel.cli.errors import UsageError


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


__all__ = ["write_file"]
