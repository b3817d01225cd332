"""Writing output files safely.

`atomic_write` writes a whole file (a ledger, a report, a reformatted document, a finished
capture) to a temporary file in the target's folder, flushed and synced, then renames it into
place: a reader sees the old file or the new one, never a part, and a failed or interrupted
write leaves the old file as it was. The new file keeps the old one's permission bits and
owner (when this process may set it), or gets the usual ones for a new file. A symlink is
written through (its regular target is replaced, the link stays); a target that exists and is
not a regular file (a device, FIFO, socket or folder) is refused, never renamed over.
`discard_partial_writes` removes the temporary files of writes still in progress (the Ctrl-C
handler calls it before the process ends).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

_partial: set[str] = set()  # temporary files being written by `atomic_write`


def discard_partial_writes() -> None:
    """Remove unfinished temporary files (called when the process is interrupted)."""
    for tmp in list(_partial):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _owner_of(target: Path) -> tuple[int, int] | None:
    """The (uid, gid) of an existing target whose owner is not this process's, else None."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    if (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return None
    return st.st_uid, st.st_gid


def atomic_write(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` atomically (see the module docstring). Raises OSError, also
    for a target that exists and is not a regular file."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO, socket or folder)", str(path))
    mode = _mode_for(target)
    owner = _owner_of(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    _partial.add(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if owner is not None:
            try:
                os.chown(tmp, *owner)
            except PermissionError:
                pass  # only root can give a file away; the new file is then this user's
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        _partial.discard(tmp)


__all__ = ["atomic_write", "discard_partial_writes"]
