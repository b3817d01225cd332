"""The daemon's home folder: where it lives, the single-instance lock, the log.

HOME (`--home`, else `$KESTREL_HOME`, else `$XDG_STATE_HOME/kestrel`, else
`~/.local/state/kestrel`) is a folder of mode 0700 holding:
- `kestrel.lock`: an exclusive `flock` held for the daemon's life (the kernel drops it when
  the process dies, even on SIGKILL: no stale-PID problem); it holds the daemon's pid;
- `kestrel.sock`: the control socket, mode 0600 (a stale one of a dead daemon is replaced);
- `kestrel.db`: the store (SQLite, WAL: also `kestrel.db-wal`, `kestrel.db-shm`);
- `kestrel.key`: the key the store's runs are signed with (only runs signed with it resume);
- `daemon.log`: the log, JSON lines (also written readably to the console).

The daemon distrusts its home: `prepare` refuses a home, or any folder above it, that another
user can write (a sticky folder such as /tmp excepted: nobody can replace what is ours in it),
a home that is not ours, and any of its files that is a symlink, not a regular file, not ours
or linked elsewhere (more than one hard link). Every file is opened with `O_NOFOLLOW` and
created owner-only (0600); the daemon runs under umask 077.
"""

from __future__ import annotations

import fcntl
import os
import secrets
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
KEY_NAME = "kestrel.key"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on the BSDs
FILES = (LOCK_NAME, DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", LOG_NAME, KEY_NAME)
"""The regular files of a home (the socket is checked on its own)."""


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

    @property
    def key(self) -> Path:
        return self.root / KEY_NAME

    def prepare(self) -> None:
        """Create the folder (0700) or check an existing one (module docstring), then check the
        files in it. Raises `HomeError` naming what is wrong and how to fix it."""
        root = self.root
        if len(str(self.socket.absolute())) > MAX_SOCKET_PATH:
            raise HomeError(f"home {root} is too long for a Unix socket path: use a shorter --home")
        uid = os.getuid()
        try:
            real = Path(os.path.realpath(root.absolute()))
            _check_parents(real.parent, uid)
            if not os.path.lexists(real):
                real.mkdir(mode=0o700, parents=True)
                _check_parents(real.parent, uid)  # the folders just made, too
            st = os.lstat(real)
            if not stat.S_ISDIR(st.st_mode):
                raise HomeError(f"home {root} is not a folder")
            if st.st_uid != uid:
                raise HomeError(f"home {root} belongs to uid {st.st_uid}, not to you (uid {uid})")
            if st.st_mode & 0o022:
                raise HomeError(f"home {root} is writable by other users (mode {st.st_mode & 0o777:04o}): "
                                "another user may have planted files in it; check them, then chmod 700 it, "
                                "or use another --home")
            os.chmod(real, 0o700)
            for name in FILES:
                check_file(real / name, uid)
            sock = real / SOCKET_NAME
            if os.path.lexists(sock):
                ss = os.lstat(sock)
                if not stat.S_ISSOCK(ss.st_mode) or ss.st_uid != uid:
                    raise HomeError(f"{sock} is not this user's socket: move it away")
        except OSError as exc:
            raise HomeError(f"home {root}: {exc.strerror or exc}") from None

    def read_key(self) -> bytes:
        """The home's signing key, created (32 random bytes, 0600) on first use."""
        try:
            fd = os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            pass
        except OSError as exc:
            raise HomeError(f"{self.key}: {exc.strerror or exc}") from None
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
                f.flush()
                os.fsync(f.fileno())
        fd = open_owned(self.key, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            key = f.read(64)
        if len(key) < 32:
            raise HomeError(f"{self.key} is not a key this daemon wrote (move it away: runs signed with it "
                            "will not resume)")
        return key


def _check_parents(folder: Path, uid: int) -> None:
    """Every folder from `folder` up to / must be this user's or root's, and writable by no one
    else unless sticky (then no one else can replace what is ours in it)."""
    for p in (folder, *folder.parents):
        try:
            st = os.stat(p)
        except FileNotFoundError:  # to be created (under umask 077): checked once it is
            continue
        if st.st_uid not in (0, uid):
            raise HomeError(f"{p} (above the home) belongs to uid {st.st_uid}: another user could replace the "
                            "home; use a --home under your own folders")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise HomeError(f"{p} (above the home) is writable by other users (mode {st.st_mode & 0o777:04o}): "
                            "another user could replace the home; use a --home under your own folders")


def check_file(path: Path, uid: int | None = None) -> None:
    """Refuse a file of the home that is a symlink, not a regular file, not ours or hard-linked
    elsewhere (absent is fine)."""
    uid = os.getuid() if uid is None else uid
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise HomeError(f"{path} is a symbolic link: the daemon never writes through one; move it away")
    if not stat.S_ISREG(st.st_mode):
        raise HomeError(f"{path} is not a regular file: move it away")
    if st.st_uid != uid:
        raise HomeError(f"{path} belongs to uid {st.st_uid}, not to you: move it away")
    if st.st_nlink > 1:
        raise HomeError(f"{path} has {st.st_nlink} hard links (it is also another file): move it away")


def open_owned(path: Path, flags: int) -> int:
    """`os.open(path, flags)` never through a symlink, creating owner-only (0600); the opened
    file checked to be a regular file of this user with one link."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink > 1:
        os.close(fd)
        raise HomeError(f"{path} is not a regular file of yours with one link: move it away")
    return fd


class Lock:
    """The exclusive `flock` on HOME/kestrel.lock; `acquire` raises `HomeError` when another
    daemon holds it (naming its pid)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        try:
            fd = open_owned(self.home.lock, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise HomeError(f"{self.home.lock}: {exc.strerror or exc} (a symlink is never followed)") from None
        f = os.fdopen(fd, "a+", encoding="utf-8")  # noqa: SIM115 (held for the daemon's life)
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
        try:  # the pid is a courtesy for the message above: a full disk must not stop the daemon
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
        except OSError:
            pass
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            try:
                self._file.close()  # closing the descriptor drops the lock
            except OSError:  # a pid that could not be flushed (a full disk): the descriptor is closed
                pass
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
        try:
            self.file.write(render_json_line(logger, method, dict(event_dict)) + "\n")
            self.file.flush()
        except (OSError, ValueError):  # a full disk loses log lines, never the event's caller
            pass
        return event_dict


class _Quiet:
    """The console as a log sink that never raises (a console redirected to a full disk)."""

    def __init__(self, file: TextIO) -> None:
        self.file = file

    def write(self, text: str) -> int:
        try:
            return self.file.write(text)
        except (OSError, ValueError):
            return 0

    def flush(self) -> None:
        try:
            self.file.flush()
        except (OSError, ValueError):
            pass


def configure_logs(home: Home, *, level: Level = "info", console: TextIO | None = None) -> TextIO:
    """structlog for the daemon: JSON lines (with UTC timestamps) appended to HOME/daemon.log,
    and readable lines on the console (stderr). Returns the open log file."""
    import logging

    try:
        fd = open_owned(home.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as exc:
        raise HomeError(f"{home.log}: {exc.strerror or exc} (a symlink is never followed)") from None
    log = os.fdopen(fd, "a", encoding="utf-8")  # noqa: SIM115 (open for the daemon's life)
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
        logger_factory=structlog.WriteLoggerFactory(file=_Quiet(console or sys.stderr)),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    return log


__all__ = [
    "DB_NAME",
    "FILES",
    "KEY_NAME",
    "LOCK_NAME",
    "LOG_NAME",
    "SOCKET_NAME",
    "Home",
    "HomeError",
    "Lock",
    "check_file",
    "configure_logs",
    "open_owned",
    "default_home",
    "remove_stale_socket",
]
