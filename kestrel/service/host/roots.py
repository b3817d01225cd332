"""`DataRoots`: the folders a server reads market data from, and the check every path passes.

A server (the MCP server, the daemon) reads data files for its clients only under the folders
its operator names (`--data-root DIR`, repeatable); with none it reads only the bundled sample.
The CLI, run by a user on their own files, reads any path and never comes here.

`DataRoots.confine(text)` returns the file's real path, or raises `DataRefused` with one line.
Invariants:
- nothing outside the roots is touched before the refusal: the path is first checked as
  written (made absolute, `..` folded, no file system access), then with its symlinks resolved;
  either outside the roots is the same refusal, whether the file exists or not, and a refusal
  never holds any of a file's content;
- a path is a text of printable characters, at most 4096 of them; `~` is not expanded (it would
  name other users' homes); a relative path is relative to the first root (or to the folder a
  client names, for the daemon: the client's working folder);
- `/proc`, `/sys` and `/dev` are refused even under a root, and so is anything but a regular
  file (a FIFO, a device, a folder), before any read: such files block or never end;
- the path returned is the one recorded in captures: absolute, symlinks resolved, the rule every
  surface (`kestrel simulate`, the daemon, the MCP server) records a data path by.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.market.instrument import check_symbol

KERNEL_FILE_SYSTEMS = ("/proc", "/sys", "/dev")
MAX_PATH_CHARS = 4096
SAMPLE = "sample"
OPTIONS = {"preset", "crossed", "symbol"}
CROSSED = ("error", "drop", "keep")


class DataRefused(ValueError):
    """A data name or path a server does not read (the text says why, in one line)."""


def recorded_path(path: str | Path) -> str:
    """How every surface records a data file's path: absolute, symlinks resolved."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(str(path))))


def shown(text: str, width: int = 120) -> str:
    """`text` quoted for a one-line message, control characters escaped, cut to `width`."""
    return repr(text[:width]) + ("..." if len(text) > width else "")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _kernel(path: str) -> bool:
    return any(_inside(path, k) for k in KERNEL_FILE_SYSTEMS)


def check_path_text(text: str, what: str = "data path") -> None:
    """Refuse a path that is empty, too long, or holds a control character (a NUL, an escape)."""
    if not text.strip():
        raise DataRefused(f"{what} is empty: give 'sample' or the path of a CSV/Parquet file")
    if len(text) > MAX_PATH_CHARS:
        raise DataRefused(f"{what} is {len(text):,} characters long: at most {MAX_PATH_CHARS}")
    if not text.isprintable():
        raise DataRefused(f"{what} {shown(text)} holds a control character: give a plain path")


@dataclass(frozen=True)
class DataRoots:
    """The roots, each kept as given (absolute) and resolved; empty: the sample only."""

    given: tuple[str, ...] = ()
    real: tuple[str, ...] = ()

    @classmethod
    def of(cls, dirs: Sequence[str], flag: str = "--data-root") -> DataRoots:
        """The roots named by the operator (their own flags: `~` is theirs to expand). Raises
        ValueError naming the first that is not a folder, or that is a kernel file system."""
        given: list[str] = []
        real: list[str] = []
        for d in dirs:
            if not d.strip():
                raise ValueError(f"{flag} is empty: give a folder of data files")
            absolute = os.path.normpath(os.path.abspath(os.path.expanduser(d)))
            try:
                resolved = os.path.realpath(absolute, strict=True)
                st = os.stat(resolved)
            except OSError as exc:
                raise ValueError(f"{flag} {d}: {exc.strerror or exc}") from None
            if not stat.S_ISDIR(st.st_mode):
                raise ValueError(f"{flag} {d}: not a folder")
            if _kernel(resolved):
                raise ValueError(f"{flag} {d}: {resolved} is a kernel file system, not a folder of data")
            given.append(absolute)
            real.append(resolved)
        return cls(tuple(given), tuple(real))

    def __bool__(self) -> bool:
        return bool(self.real)

    def confine(self, text: str, base: str | None = None) -> Path:
        """The real path of the data file `text` names (see the module docstring)."""
        check_path_text(text)
        if not self.real:
            raise DataRefused(
                "this server reads no data files, only the bundled 'sample' (its operator can "
                "serve the files under a folder with --data-root DIR)"
            )
        if text.startswith("~"):
            raise DataRefused(f"data path {shown(text)}: '~' is not expanded here; give a path under a data root")
        start = base if base is not None else self.given[0]
        written = os.path.normpath(os.path.join(start, text))
        refused = DataRefused(f"data path {shown(text)} is outside this server's data roots "
                              "(the folders its operator serves with --data-root)")
        if not any(_inside(written, r) for r in (*self.given, *self.real)):
            raise refused
        real = os.path.realpath(written)  # symlinks resolved: a link out of the roots is outside
        if not any(_inside(real, r) for r in self.real):
            raise refused
        if _kernel(real):
            raise DataRefused(f"data path {shown(text)} is on a kernel file system (/proc, /sys, /dev): not data")
        try:
            st = os.stat(real)
        except OSError as exc:
            reasons = {errno.ENOENT: "no such file", errno.ELOOP: "a loop of symbolic links",
                       errno.EACCES: "permission denied", errno.ENOTDIR: "no such file"}
            why = reasons.get(exc.errno or 0) or exc.strerror or "cannot be read"
            raise DataRefused(f"data path {shown(text)}: {why}") from None
        if stat.S_ISDIR(st.st_mode):
            raise DataRefused(f"data path {shown(text)} is a folder: give a CSV or Parquet file in it")
        if not stat.S_ISREG(st.st_mode):
            raise DataRefused(f"data path {shown(text)} is not a regular file (a FIFO, socket or device)")
        return Path(real)

    def data_name(self, name: str) -> str:
        """A client's data name (`sample`, `sample|seed=N`, `PATH|preset=P|crossed=C|symbol=S`)
        with its path confined and its options checked: the canonical name to load."""
        check_path_text(name, "data")
        head, sep, rest = name.strip().partition("|")
        opts: dict[str, str] = {}
        for item in rest.split("|") if sep else []:
            key, eq, value = item.partition("=")
            allowed = {"seed"} if head == SAMPLE else OPTIONS
            if not eq or key not in allowed:
                raise DataRefused(f"data option {shown(item, 40)} is not one of "
                                  f"{', '.join(sorted(allowed))} (write KEY=VALUE)")
            if key in opts:
                raise DataRefused(f"data option {key} is given twice")
            opts[key] = value
        if "symbol" in opts:
            try:
                check_symbol(opts["symbol"])
            except ValueError as exc:
                raise DataRefused(str(exc)) from None
        if "crossed" in opts and opts["crossed"] not in CROSSED:
            raise DataRefused(f"data option crossed must be one of {', '.join(CROSSED)}, "
                              f"got {shown(opts['crossed'], 20)}")
        if "preset" in opts:
            from kestrel.data.spec import PRESETS

            if opts["preset"] not in PRESETS:
                raise DataRefused(f"data option preset must be one of {', '.join(sorted(PRESETS))}, "
                                  f"got {shown(opts['preset'], 40)}")
        if head == SAMPLE:
            return name.strip()
        path = str(self.confine(head))
        return path + "".join(f"|{k}={v}" for k, v in opts.items())


__all__ = [
    "KERNEL_FILE_SYSTEMS",
    "MAX_PATH_CHARS",
    "DataRefused",
    "DataRoots",
    "check_path_text",
    "recorded_path",
    "shown",
]
