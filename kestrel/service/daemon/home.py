"""The daemon's home folder: where it lives, the single-instance lock, the log.

HOME (`--home`, else `$KESTREL_HOME`, else `$XDG_STATE_HOME/kestrel`, else
`~/.local/state/kestrel`) is a folder of mode 0700 holding:
- `kestrel.lock`: an exclusive `flock` held for the daemon's life (the kernel drops it when
  the process dies, even on SIGKILL: no stale-PID problem); it holds the daemon's pid;
- `kestrel.sock`: the control socket, mode 0600 (a stale one of a dead daemon is replaced);
- `kestrel.db`: the store (SQLite, WAL: also `kestrel.db-wal`, `kestrel.db-shm`);
- `daemon.log`: the log, JSON lines (also written readably to the console).
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

import structlog

from kestrel.logs import Level, console_processors, render_json_line

SOCKET_NAME = "kestrel.sock"
LOCK_NAME = "kestrel.lock"
DB_NAME = "kestrel.db"
LOG_NAME = "daemon.log"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on the BSDs


class HomeError(RuntimeError):
    """The home cannot be used (another daemon holds it, bad permissions, ...)."""


def default_home(env: dict[str, str] | None = None) -> Path:
    e = os.environ if env is None else env
    if e.get("KESTREL_HOME"):
        return Path(e["KESTREL_HOME"]).expanduser()
    state = e.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state).expanduser() / "kestrel"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def socket(self) -> Path:
        return self.root / SOCKET_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def db(self) -> Path:
        return self.root / DB_NAME

    @property
    def log(self) -> Path:
        return self.root / LOG_NAME

    def prepare(self) -> None:
        """Create the folder (0700) or check an existing one is ours and make it 0700."""
        root = self.root
        if len(str(self.socket.absolute())) > MAX_SOCKET_PATH:
            raise HomeError(f"home {root} is too long for a Unix socket path: use a shorter --home")
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = root.stat()
            if not stat.S_ISDIR(st.st_mode):
                raise HomeError(f"home {root} is not a folder")
            if st.st_uid != os.getuid():
                raise HomeError(f"home {root} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})")
            root.chmod(0o700)
        except OSError as exc:
            raise HomeError(f"home {root}: {exc.strerror or exc}") from None


class Lock:
    """The exclusive `flock` on HOME/kestrel.lock; `acquire` raises `HomeError` when another
    daemon holds it (naming its pid)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        f = open(self.home.lock, "a+", encoding="utf-8")  # noqa: SIM115 (held for the daemon's life)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            pid = f.read().strip() or "?"
            f.close()
            raise HomeError(
                f"a daemon is already running on {self.home.root} (pid {pid}); stop it with "
                f"`kestrel ctl --home {self.home.root} shutdown` or use another --home"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the lock
            self._file = None


def remove_stale_socket(home: Home) -> bool:
    """Remove the socket a dead daemon left (call only while holding the lock)."""
    try:
        home.socket.unlink()
        return True
    except FileNotFoundError:
        return False


class _Tee:
    """A structlog processor: writes the JSON line to `file`, passes the event on."""

    def __init__(self, file: TextIO) -> None:
        self.file = file

    def __call__(self, logger: Any, method: str, event_dict: Any) -> Any:
        self.file.write(render_json_line(logger, method, dict(event_dict)) + "\n")
        self.file.flush()
        return event_dict


def configure_logs(home: Home, *, level: Level = "info", console: TextIO | None = None) -> TextIO:
    """structlog for the daemon: JSON lines (with UTC timestamps) appended to HOME/daemon.log,
    and readable lines on the console (stderr). Returns the open log file."""
    import logging

    log = open(home.log, "a", encoding="utf-8")  # noqa: SIM115 (open for the daemon's life)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _Tee(log),
        *console_processors()[2:],
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.WriteLoggerFactory(file=console or sys.stderr),
        cache_logger_on_first_use=False,
    )
    return log


__all__ = [
    "DB_NAME",
    "LOCK_NAME",
    "LOG_NAME",
    "SOCKET_NAME",
    "Home",
    "HomeError",
    "Lock",
    "configure_logs",
    "default_home",
    "remove_stale_socket",
]
