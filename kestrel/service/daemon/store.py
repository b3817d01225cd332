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
  adds nothing, and the rowid order is the order things happened.
"""

from __future__ import annotations

import sqlite3
import time
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
)
"""`MIGRATIONS[k]` takes the schema from version k to k+1."""

SCHEMA_VERSION = len(MIGRATIONS)


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
    """What a restart needs to resume a run."""

    run: str
    flags: dict[str, Any]
    pace: str
    resumed: int


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


class Store:
    """The database at `path` (created, checked and migrated by the constructor)."""

    def __init__(self, path: Path, migrations: Sequence[str] = MIGRATIONS) -> None:
        self.path = path
        try:
            self._conn = connect(path)
            self._check()
            self._migrate(migrations)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: {exc} (move the file away to start with an empty store)") from None
        self._n = self._conn.execute("SELECT COALESCE(MAX(n), 0) FROM runs").fetchone()[0]

    def _check(self) -> None:
        rows = self._conn.execute("PRAGMA integrity_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            detail = "; ".join(str(r[0]) for r in rows[:3])
            raise StoreError(f"{self.path}: integrity check failed: {detail} (restore a backup or move it away)")

    def _migrate(self, migrations: Sequence[str]) -> None:
        version = self.version()
        if version > len(migrations):
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this Kestrel's "
                f"({len(migrations)}): upgrade Kestrel or use another --home"
            )
        if version == len(migrations):
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for step in migrations[version:]:
                for statement in step.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version={len(migrations)}")
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
                    c.execute("INSERT INTO runs (id, n, flags, argv, pace, state, submitted) "
                              "VALUES (?, ?, ?, ?, ?, 'running', ?)",
                              (op.run, self._n, op.flags, op.argv, op.pace, time.time()))
                elif isinstance(op, Resumed):
                    c.execute("UPDATE runs SET resumed = resumed + 1 WHERE id = ?", (op.run,))
                else:
                    c.execute("UPDATE runs SET state = ?, reason = ?, summary = ?, ledger = ?, capture = ?, "
                              "ended = ? WHERE id = ? AND state = 'running'",
                              (op.state, op.reason, op.summary, op.ledger, op.capture, time.time(), op.run))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            self._n = c.execute("SELECT COALESCE(MAX(n), 0) FROM runs").fetchone()[0]
            raise

    def reader(self) -> Reader:
        return Reader(connect(self.path))


class Reader:
    """A read connection (use from one thread at a time)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def close(self) -> None:
        self._conn.close()

    def unfinished(self) -> list[StoredRun]:
        rows = self._conn.execute("SELECT id, flags, pace, resumed FROM runs WHERE state = 'running' ORDER BY n")
        return [StoredRun(r[0], msgspec.json.decode(r[1]), r[2], r[3]) for r in rows]

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
            "SELECT COUNT(*) FROM events WHERE run = ? AND kind = 'ledger' AND CAST(body AS TEXT) LIKE '{\"event\":\"fill\"%'",
            (row[0],),
        ).fetchone()[0]
        return RunInfo(
            run=row[0], state=row[1], argv=msgspec.json.decode(row[2]), pace=row[3],
            submitted=_iso(row[4]), ended=None if row[5] is None else _iso(row[5]), reason=row[6],
            turns=counts.get("turn", 0), ledger_events=counts.get("ledger", 0), fills=fills,
            resumed=row[7], summary=None if row[8] is None else msgspec.json.decode(row[8]),
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


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
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
