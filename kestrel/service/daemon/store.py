"""`Store`: the daemon's SQLite database (stdlib `sqlite3`): runs and what they committed.

Invariants:
- WAL journal, `synchronous=FULL`: a committed transaction survives kill -9 and power loss;
- one writer connection (`Store.write`, used by one thread at a time: the `Writer` task), any
  number of readers (`Store.reader()`), which WAL lets read while the writer writes;
- the schema is versioned (`PRAGMA user_version`) and upgraded by `MIGRATIONS` in one
  transaction at open; a database from a newer Kestrel is refused; `PRAGMA integrity_check`
  runs at open and a damaged database is refused (`StoreError`, nothing is written);
- `events` is append-only and idempotent: a record is keyed by (run, kind, key) and inserted
  with `ON CONFLICT DO NOTHING` (duplicates only: a broken CHECK still fails), so a resumed run that re-emits what it committed before its crash
  adds nothing, and the rowid order is the order things happened;
- nothing is changed before the file is known to be ours: it is opened read-only first and
  must pass `PRAGMA integrity_check`, carry Kestrel's `application_id` (or none, for a new or
  an older Kestrel's store) and hold exactly the schema of its `user_version` (the tables and
  indexes `MIGRATIONS` create, nothing else); only then is it opened for writing (WAL set,
  migrations run, the application id stamped). A new file is created 0600, never through a
  symlink, and SQLite gives its `-wal` and `-shm` files the same mode;
- runs are signed: with the home's key (`key`), each run's id, flags, argv and pace carry an
  HMAC-SHA256 (`mac`), and `Reader.unfinished` sets apart the runs whose signature does not
  verify (planted, edited, or from another home): they are never resumed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from kestrel.service.daemon.protocol import RunInfo

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id        TEXT PRIMARY KEY,
        n         INTEGER NOT NULL UNIQUE,
        flags     BLOB NOT NULL,
        argv      BLOB NOT NULL,
        pace      TEXT NOT NULL,
        state     TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
        reason    TEXT,
        submitted REAL NOT NULL,
        ended     REAL,
        resumed   INTEGER NOT NULL DEFAULT 0,
        summary   BLOB,
        ledger    BLOB,
        capture   BLOB
    );
    CREATE TABLE events (
        id   INTEGER PRIMARY KEY AUTOINCREMENT,
        run  TEXT NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL CHECK (kind IN ('turn', 'ledger', 'evidence', 'end')),
        key  TEXT NOT NULL,
        body BLOB NOT NULL,
        UNIQUE (run, kind, key)
    );
    CREATE INDEX events_by_run ON events (run, id);
    """,
    """
    ALTER TABLE runs ADD COLUMN mac BLOB;
    """,
)
"""`MIGRATIONS[k]` takes the schema from version k to k+1."""

SCHEMA_VERSION = len(MIGRATIONS)
APPLICATION_ID = 0x4B455354
"""`PRAGMA application_id` of a Kestrel store ("KEST")."""
TRANSIENT = {5, 6, 10, 13}
"""SQLite result codes of a store that may work again (BUSY, LOCKED, IOERR, FULL)."""


def transient(exc: BaseException) -> bool:
    """A store error that may pass (a full disk, an I/O error, a lock): retry, do not fail."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in TRANSIENT:
        return True
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and any(
        w in text for w in ("disk is full", "disk i/o error", "database is locked", "no space"))


def run_mac(key: bytes, run: str, flags: bytes, argv: bytes, pace: str) -> bytes:
    """The signature of a run's row (what resuming it would replay)."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for part in (run.encode(), flags, argv, pace.encode()):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def schema_of(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(type, name, sql) of every table and index, the SQL with its blanks folded."""
    rows = conn.execute("SELECT type, name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name").fetchall()
    return [(t, n, " ".join(sql.split())) for t, n, sql in rows]


def expected_schema(migrations: Sequence[str], version: int) -> list[tuple[str, str, str]]:
    """The schema `migrations[:version]` build (on an empty database in memory)."""
    conn = sqlite3.connect(":memory:")
    try:
        for step in migrations[:version]:
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        return schema_of(conn)
    finally:
        conn.close()


class StoreError(RuntimeError):
    """The database cannot be used (damaged, from a newer version, unreadable)."""


class Insert(msgspec.Struct, frozen=True):
    """One idempotent record for `events`."""

    run: str
    kind: str
    key: str
    body: bytes


class NewRun(msgspec.Struct, frozen=True):
    run: str
    flags: bytes
    argv: bytes
    pace: str


class Ended(msgspec.Struct, frozen=True):
    """A run's end: its state, and for a finished run its exact ledger, capture and summary."""

    run: str
    state: str
    reason: str | None = None
    summary: bytes | None = None
    ledger: bytes | None = None
    capture: bytes | None = None


class Resumed(msgspec.Struct, frozen=True):
    run: str


Op = Insert | NewRun | Ended | Resumed


@dataclass(frozen=True)
class StoredRun:
    """What a restart needs to resume a run; `problem` says why it cannot be (its row does
    not decode, its signature does not verify), else None."""

    run: str
    flags: dict[str, Any]
    pace: str
    resumed: int
    problem: str | None = None


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _own_file(path: Path) -> bool:
    """Create `path` (0600, not through a symlink) when absent; refuse one that is not a regular
    file of this user. True when it was created."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)
        return True
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path}: not a regular file (a symlink, folder or device): move it away")
    if st.st_uid != os.getuid():
        raise StoreError(f"{path}: belongs to uid {st.st_uid}, not to you: move it away")
    return False


class Store:
    """The database at `path` (created, checked and migrated by the constructor); `key` signs
    its runs (None: rows are neither signed nor checked)."""

    def __init__(self, path: Path, migrations: Sequence[str] = MIGRATIONS, key: bytes | None = None) -> None:
        self.path = path
        self.key = key
        try:
            for suffix in ("", "-wal", "-shm"):
                sibling = Path(f"{path}{suffix}")
                if suffix and not os.path.lexists(sibling):
                    continue
                _own_file(sibling)
            self._identify(migrations)  # read-only: nothing is written to a file not ours
            self._conn = connect(path)
            self._migrate(migrations)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: {exc} (move the file away to start with an empty store)") from None
        except OSError as exc:
            raise StoreError(f"{path}: {exc.strerror or exc}") from None
        self._n = self._conn.execute("SELECT COALESCE(MAX(n), 0) FROM runs").fetchone()[0]

    def _identify(self, migrations: Sequence[str]) -> None:
        """The checks before anything is changed (module docstring), on a read-only connection."""
        # with no write-ahead log to recover, read the file as it is: SQLite then creates no
        # -wal or -shm file beside it (with one, a read-only connection reads through it)
        wal = os.path.lexists(f"{self.path}-wal")
        uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + ("?mode=ro" if wal else "?immutable=1")
        conn = sqlite3.connect(uri, uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            if [r[0] for r in rows] != ["ok"]:
                detail = "; ".join(str(r[0]) for r in rows[:3])
                raise StoreError(f"{self.path}: integrity check failed: {detail} (restore a backup or move it away)")
            app = int(conn.execute("PRAGMA application_id").fetchone()[0])
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if app not in (0, APPLICATION_ID):
                raise StoreError(f"{self.path}: not a Kestrel store (application id {app:#x}): move it away "
                                 "or use another --home; nothing was written to it")
            if version > len(migrations):
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this Kestrel's "
                    f"({len(migrations)}): upgrade Kestrel or use another --home"
                )
            found = schema_of(conn)
            if found != expected_schema(migrations, version):
                names = ", ".join(n for _, n, _ in found[:6]) or "none"
                raise StoreError(f"{self.path}: not a Kestrel store (its tables and indexes, {names}, are not "
                                 f"those of schema version {version}): move it away or use another --home; "
                                 "nothing was written to it")
        finally:
            conn.close()

    def _migrate(self, migrations: Sequence[str]) -> None:
        version = self.version()
        if version == len(migrations):
            if int(self._conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
                self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for step in migrations[version:]:
                for statement in step.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version={len(migrations)}")
            self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self._conn.close()

    # -- writes (one thread at a time) -------------------------------------------------------

    def write(self, ops: Iterable[Op]) -> None:
        """Apply `ops` in ONE transaction, committed (fsynced) before returning."""
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                if isinstance(op, Insert):
                    c.execute("INSERT INTO events (run, kind, key, body) VALUES (?, ?, ?, ?) "
                              "ON CONFLICT (run, kind, key) DO NOTHING",
                              (op.run, op.kind, op.key, op.body))
                elif isinstance(op, NewRun):
                    self._n += 1
                    mac = None if self.key is None else run_mac(self.key, op.run, op.flags, op.argv, op.pace)
                    c.execute("INSERT INTO runs (id, n, flags, argv, pace, state, submitted, mac) "
                              "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
                              (op.run, self._n, op.flags, op.argv, op.pace, time.time(), mac))
                elif isinstance(op, Resumed):
                    c.execute("UPDATE runs SET resumed = resumed + 1 WHERE id = ?", (op.run,))
                else:
                    c.execute("UPDATE runs SET state = ?, reason = ?, summary = ?, ledger = ?, capture = ?, "
                              "ended = ? WHERE id = ? AND state = 'running'",
                              (op.state, op.reason, op.summary, op.ledger, op.capture, time.time(), op.run))
            c.execute("COMMIT")
        except BaseException:
            try:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                self._n = c.execute("SELECT COALESCE(MAX(n), 0) FROM runs").fetchone()[0]
            except sqlite3.Error:
                pass  # the failure that matters is the one being raised
            raise

    def reader(self) -> Reader:
        return Reader(connect(self.path), self.key)


class Reader:
    """A read connection (use from one thread at a time)."""

    def __init__(self, conn: sqlite3.Connection, key: bytes | None = None) -> None:
        self._conn = conn
        self._key = key

    def close(self) -> None:
        self._conn.close()

    def unfinished(self) -> list[StoredRun]:
        """Every run the store holds as running, each with what resuming it needs or with the
        problem that forbids it (one bad row never hides the others)."""
        rows = self._conn.execute(
            "SELECT id, flags, argv, pace, resumed, mac FROM runs WHERE state = 'running' ORDER BY n").fetchall()
        out: list[StoredRun] = []
        for run, flags, argv, pace, resumed, mac in rows:
            problem = None
            if self._key is not None:
                ok = (isinstance(mac, bytes) and isinstance(flags, bytes) and isinstance(argv, bytes)
                      and hmac.compare_digest(mac, run_mac(self._key, str(run), flags, argv, str(pace))))
                if not ok:
                    problem = ("not created by this daemon (its signature does not match this home's key): "
                               "not resumed")
            decoded: dict[str, Any] = {}
            if problem is None:
                try:
                    value = msgspec.json.decode(flags)
                    if not isinstance(value, dict):
                        raise ValueError("not a record")
                    decoded = value
                except (msgspec.DecodeError, ValueError, TypeError) as exc:
                    problem = f"its stored flags do not decode ({exc}): not resumed"
            out.append(StoredRun(str(run), decoded, str(pace), int(resumed or 0), problem))
        return out

    def flags(self, run: str) -> dict[str, Any] | None:
        """The flags `run` was submitted with (None: no such run)."""
        row = self._conn.execute("SELECT flags FROM runs WHERE id = ?", (run,)).fetchone()
        if row is None:
            return None
        flags: dict[str, Any] = msgspec.json.decode(row[0])
        return flags

    def exists(self, run: str) -> bool:
        return self._conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone() is not None

    def info(self, run: str) -> RunInfo | None:
        row = self._conn.execute(
            "SELECT id, state, argv, pace, submitted, ended, reason, resumed, summary FROM runs WHERE id = ?", (run,)
        ).fetchone()
        return None if row is None else self._info(row)

    def runs(self) -> list[RunInfo]:
        rows = self._conn.execute(
            "SELECT id, state, argv, pace, submitted, ended, reason, resumed, summary FROM runs ORDER BY n"
        ).fetchall()
        return [self._info(r) for r in rows]

    def _info(self, row: Sequence[Any]) -> RunInfo:
        counts = dict(self._conn.execute(
            "SELECT kind, COUNT(*) FROM events WHERE run = ? GROUP BY kind", (row[0],)
        ).fetchall())
        fills = self._conn.execute(
            "SELECT COUNT(*) FROM events WHERE run = ? AND kind = 'ledger' AND (CAST(body AS TEXT) LIKE "
            "'{\"event\":\"fill\"%' OR CAST(body AS TEXT) LIKE '{\"symbol\":\"%\",\"event\":\"fill\",%')",
            (row[0],),
        ).fetchone()[0]
        return RunInfo(
            run=str(row[0]), state=str(row[1]), argv=_decoded(row[2], list, []), pace=str(row[3]),
            submitted=_iso(row[4]), ended=None if row[5] is None else _iso(row[5]),
            reason=None if row[6] is None else str(row[6]),
            turns=counts.get("turn", 0), ledger_events=counts.get("ledger", 0), fills=fills,
            resumed=int(row[7] or 0), summary=None if row[8] is None else _decoded(row[8], dict, None),
        )

    def events(self, run: str, after: int = 0, kinds: tuple[str, ...] = ("turn", "ledger", "evidence", "end"),
               limit: int = 10_000) -> list[tuple[int, str, str, bytes]]:
        """(rowid, kind, key, body) of `run`'s records after rowid `after`, in commit order."""
        marks = ",".join("?" * len(kinds))
        return self._conn.execute(
            f"SELECT id, kind, key, body FROM events WHERE run = ? AND id > ? AND kind IN ({marks}) "
            "ORDER BY id LIMIT ?",
            (run, after, *kinds, limit),
        ).fetchall()

    def artifacts(self, run: str) -> tuple[str, bytes | None, bytes | None]:
        """(state, ledger, capture) of `run` (the blobs are set once it is done)."""
        row = self._conn.execute("SELECT state, ledger, capture FROM runs WHERE id = ?", (run,)).fetchone()
        return (row[0], row[1], row[2]) if row is not None else ("unknown", None, None)


def _iso(t: Any) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _decoded(blob: Any, kind: type, default: Any) -> Any:
    """A stored JSON value of type `kind`, or `default` when the row holds something else (a
    damaged or edited row never breaks a listing)."""
    try:
        value = msgspec.json.decode(blob)
    except (msgspec.DecodeError, TypeError):
        return default
    return value if isinstance(value, kind) else default


__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "expected_schema",
    "run_mac",
    "schema_of",
    "transient",
    "Ended",
    "Insert",
    "NewRun",
    "Op",
    "Reader",
    "Resumed",
    "Store",
    "StoreError",
    "StoredRun",
    "connect",
]
