"""The daemon's store: WAL + synchronous=FULL, versioned schema and migrations, integrity
check, idempotent records, and the group-commit writer (asyncio and trio)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import msgspec
import pytest

from kestrel.service.daemon.store import MIGRATIONS, SCHEMA_VERSION, Ended, Insert, NewRun, Resumed, Store, StoreError
from kestrel.service.daemon.writer import open_writer


def new_run(store: Store, run: str = "r1") -> None:
    store.write([NewRun(run, b"{}", msgspec.json.encode(["--pace", "60"]), "60")])


def test_a_fresh_store_is_wal_full_sync_and_at_the_current_schema(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    assert store.version() == SCHEMA_VERSION == len(MIGRATIONS)
    conn = sqlite3.connect(tmp_path / "k.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"runs", "events"}
    store.close()


def test_records_are_idempotent_and_kept_in_commit_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    store.write([Insert("r1", "turn", "d/OPEN", b'{"a":1}'), Insert("r1", "ledger", "d/0000000", b'{"event":"fill"}')])
    store.write([Insert("r1", "turn", "d/OPEN", b'{"a":2}')])  # a resumed run re-emits it: ignored
    store.write([Insert("r1", "turn", "d/11:00", b'{"a":3}')])
    reader = store.reader()
    rows = reader.events("r1", kinds=("turn",))
    assert [(r[2], r[3]) for r in rows] == [("d/OPEN", b'{"a":1}'), ("d/11:00", b'{"a":3}')]
    info = reader.info("r1")
    assert info is not None
    assert (info.state, info.turns, info.ledger_events, info.fills, info.argv) == ("running", 2, 1, 1, ["--pace", "60"])
    reader.close()
    store.close()


def test_an_end_is_final_and_unfinished_runs_are_listed_for_resume(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    for run in ("a", "b", "c"):
        new_run(store, run)
    store.write([Ended("a", "done", None, b"{}", b"L", b"C"), Resumed("b")])
    store.write([Ended("a", "failed", "late")])  # only a running run can end
    reader = store.reader()
    assert reader.artifacts("a") == ("done", b"L", b"C")
    assert [(s.run, s.resumed) for s in reader.unfinished()] == [("b", 1), ("c", 0)]
    reader.close()
    store.close()
    again = Store(tmp_path / "k.db")  # reopening keeps everything and numbers on
    new_run(again, "d")
    r = again.reader()
    assert [i.run for i in r.runs()] == ["a", "b", "c", "d"]
    r.close()
    again.close()


def test_a_failed_transaction_commits_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    with pytest.raises(sqlite3.IntegrityError):
        store.write([Insert("r1", "turn", "x", b"1"), Insert("r1", "nonsense", "y", b"2")])
    reader = store.reader()
    assert reader.events("r1") == []
    reader.close()
    store.close()


def test_migrations_run_in_order_from_an_older_schema(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    Store(path).close()  # the current schema
    extra = "CREATE TABLE notes (run TEXT, text TEXT); INSERT INTO notes VALUES ('x', 'migrated')"
    upgraded = Store(path, migrations=(*MIGRATIONS, extra))
    assert upgraded.version() == SCHEMA_VERSION + 1
    assert upgraded._conn.execute("SELECT text FROM notes").fetchall() == [("migrated",)]
    upgraded.close()


def test_a_store_from_a_newer_kestrel_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this Kestrel"):
        Store(path)


def test_a_damaged_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    store = Store(path)
    new_run(store)
    store.write([Insert("r1", "turn", f"k{i}", b"x" * 2000) for i in range(200)])
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(path.read_bytes())
    for off in range(4096 * 2, len(data) - 4096, 4096):  # scribble over the middle pages
        data[off + 100 : off + 400] = b"\x5a" * 300
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError):
        Store(path)


def test_garbage_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="move the file away"):
        Store(path)


@pytest.mark.anyio
async def test_the_writer_groups_concurrent_commits_and_each_caller_waits_for_its_own(anyio_backend: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    committed: list[int] = []
    async with open_writer(store, lambda ops: committed.append(len(ops))) as writer:
        async def one(i: int) -> None:
            await writer.commit([Insert("r1", "ledger", f"d/{i:07d}", b"{}")])
            reader = store.reader()  # once commit returns, a new connection sees the row
            assert any(r[2] == f"d/{i:07d}" for r in reader.events("r1", limit=1000))
            reader.close()

        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(one, i)
    assert sum(committed) == 60
    assert writer.commits == len(committed) < 60  # grouped: fewer transactions than callers
    store.close()


@pytest.mark.anyio
async def test_a_failed_group_fails_its_callers_and_the_writer_goes_on(anyio_backend: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    async with open_writer(store) as writer:
        with pytest.raises(sqlite3.IntegrityError):
            await writer.commit([Insert("r1", "bogus-kind", "k", b"1")])
        await writer.commit([Insert("r1", "turn", "k", b"1")])
    reader = store.reader()
    assert [r[2] for r in reader.events("r1")] == ["k"]
    reader.close()
    store.close()


@pytest.mark.anyio
async def test_queued_records_linger_until_an_awaited_commit_takes_them_along(anyio_backend: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    groups: list[list[str]] = []
    async with open_writer(store, lambda ops: groups.append([getattr(o, "key", type(o).__name__) for o in ops]),
                           linger=30.0) as writer:
        first = await writer.enqueue([Insert("r1", "ledger", "d/0000000", b"{}")])
        second = await writer.enqueue([Insert("r1", "ledger", "d/0000001", b"{}")])
        await anyio.sleep(0.1)
        assert groups == [] and not first.done.is_set()  # lingering: nobody waits for them
        await writer.commit([Ended("r1", "done")])  # an awaited commit goes at once, with them
        assert first.done.is_set() and second.done.is_set()
    assert groups == [["d/0000000", "d/0000001", "Ended"]]
    store.close()


@pytest.mark.anyio
async def test_a_lingering_record_is_committed_within_the_linger(anyio_backend: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    async with open_writer(store, linger=0.05) as writer:
        queued = await writer.enqueue([Insert("r1", "turn", "d/OPEN", b"{}")])
        with anyio.fail_after(10):
            await writer.wait(queued)
    store.close()


@pytest.mark.anyio
async def test_a_failed_queued_group_is_reported(anyio_backend: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    new_run(store)
    failures: list[tuple[int, str]] = []
    async with open_writer(store, on_error=lambda ops, exc: failures.append((len(ops), type(exc).__name__)),
                           linger=0.01) as writer:
        bad = await writer.enqueue([Insert("r1", "bogus", "k", b"1")])
        with pytest.raises(sqlite3.IntegrityError):
            await writer.wait(bad)
    assert failures == [(1, "IntegrityError")]
    store.close()


def test_the_home_defaults_follow_the_environment() -> None:
    from kestrel.service.daemon.home import default_home

    assert default_home({"KESTREL_HOME": "/srv/k", "XDG_STATE_HOME": "/x"}) == Path("/srv/k")
    assert default_home({"XDG_STATE_HOME": "/x"}) == Path("/x/kestrel")
    assert default_home({}) == Path("~/.local/state/kestrel").expanduser()
