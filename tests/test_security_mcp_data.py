"""Security: what the MCP server reads for a hostile client (observations 1-3 and the data
items of 8). The server reads data only under its data roots, refuses kernel file systems and
anything but regular files before any read, never echoes a file's content nor says whether a
path outside the roots exists, measures a file before loading it, and loads on a bounded pool
of its own, so no flood of loads starves it."""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from kestrel.service.host import open_host  # noqa: E402
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits  # noqa: E402
from kestrel.service.host.pool import PoolBusy, WorkPool  # noqa: E402
from kestrel.service.host.roots import DataRoots  # noqa: E402
from kestrel.service.mcp import build_server  # noqa: E402
from security_support import TOKEN_A, call, client, mcp_server, refusal, run_as, second_user  # noqa: E402

pytestmark = pytest.mark.anyio

SECRET = "OPENAI_API_KEY=sk-live-0123456789abcdefSECRET"
VIEW = {"view": "VIEW v: quote", "at": "10:30"}
PLAN = "PLAN p RISK maxpos 1 maxloss 10\nWHEN last > 0: BUY 1 MKT\n"


@asynccontextmanager
async def connect(roots: list[Path], limits: ServiceLimits = DEFAULT_LIMITS) -> AsyncIterator[Client]:
    async with open_host(limits=limits) as h:
        async with Client(build_server(h, roots=DataRoots.of([str(r) for r in roots]), limits=limits),
                          mode="legacy") as c:
            yield c


def quotes_csv(path: Path, rows: int = 50, price: float = 1.10) -> Path:
    lines = ["timestamp,bid,ask"] + [
        f"2024-04-15T{9 + i // 60:02d}:{i % 60:02d}:00Z,{price + i * 1e-4:.4f},{price + i * 1e-4 + 2e-4:.4f}"
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_a_root_only_secret_outside_the_roots_is_refused_without_a_word_of_it(
        anyio_backend: str, tmp_path: Path) -> None:
    """Observation 1: `data` named a root-only `.env`; the refusal echoed its first line and its
    type told whether the file existed."""
    served, private = tmp_path / "data", tmp_path / "private"
    served.mkdir()
    private.mkdir()
    env = private / ".env"
    env.write_text(SECRET + "\n")
    env.chmod(0o600)
    async with connect([served]) as c:
        for tool, args in (("view", VIEW), ("simulate", {"plan": PLAN}), ("session_start", {})):
            there = await refusal(c, tool, data=str(env), **args)
            missing = await refusal(c, tool, data=str(private / "nothing.env"), **args)
            tilde = await refusal(c, tool, data="~root/.env", **args)
            for text in (there, missing, tilde):
                assert "sk-live" not in text and "OPENAI" not in text
            assert "outside this server's data roots" in there
            # the same refusal whether the file exists or not
            assert there.replace(str(env), "P") == missing.replace(str(private / "nothing.env"), "P")
            assert "'~' is not expanded" in tilde


async def test_a_file_in_a_root_is_read_but_its_text_is_never_quoted(anyio_backend: str, tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(SECRET + "," + SECRET + "\nx,y\n")
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"{SECRET}{i}" for i in range(50)) + "\n1\n")
    async with connect([tmp_path]) as c:
        for name in (".env", ".env|preset=oanda", "wide.csv|preset=truefx", "wide.csv"):
            text = await refusal(c, "simulate", plan=PLAN, data=name)
            assert "sk-live" not in text and "SECRET" not in text, text
            assert len(text) <= DEFAULT_LIMITS.max_error_chars + 40


async def test_symlinks_are_resolved_before_the_check(anyio_backend: str, tmp_path: Path) -> None:
    served, outside = tmp_path / "data", tmp_path / "outside"
    served.mkdir()
    outside.mkdir()
    quotes_csv(outside / "q.csv")
    (served / "out.csv").symlink_to(outside / "q.csv")  # a link out of the root is outside
    (served / "dir").symlink_to(outside)
    (served / "loop1").symlink_to(served / "loop2")
    (served / "loop2").symlink_to(served / "loop1")
    quotes_csv(served / "in.csv")
    (tmp_path / "into.csv").symlink_to(served / "in.csv")  # outside as written: not even looked at
    async with connect([served]) as c:
        for name in ("out.csv", "dir/q.csv", f"{served}/../outside/q.csv", str(outside / "q.csv"),
                     str(tmp_path / "into.csv")):
            assert "outside this server's data roots" in await refusal(c, "view", data=name, **VIEW), name
        assert "loop of symbolic links" in await refusal(c, "view", data="loop1", **VIEW)
        for name in ("in.csv", str(served / "in.csv")):
            assert (await call(c, "view", data=name, view="VIEW v: quote", at="09:40"))["text"]


async def test_kernel_files_and_non_regular_files_are_refused_before_any_read(
        anyio_backend: str, tmp_path: Path) -> None:
    """Observation 3's load: /proc/kmsg blocks a reader forever; a FIFO too."""
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    async with connect([Path("/")]) as c:
        with anyio.fail_after(20):  # nothing may block
            for name in ("/proc/kmsg", "/proc/self/environ", "/dev/zero", "/sys/kernel/notes", str(fifo)):
                text = await refusal(c, "view", data=name, **VIEW)
                assert "kernel file system" in text or "not a regular file" in text, text
            assert "is a folder" in await refusal(c, "view", data=str(tmp_path), **VIEW)


async def test_forty_one_hanging_loads_do_not_take_the_server(anyio_backend: str) -> None:
    """Observation 3: 41 calls with data=/proc/kmsg used up the 40 shared worker threads."""
    async with connect([Path("/")]) as c:
        with anyio.fail_after(60):
            async def one() -> None:
                assert "kernel file system" in await refusal(c, "view", data="/proc/kmsg", **VIEW)

            async with anyio.create_task_group() as tg:
                for _ in range(45):
                    tg.start_soon(one)
            view = await call(c, "view", **VIEW)
    assert view["cutoff"] == "10:25:00"


async def test_the_load_pool_is_bounded_and_of_its_own(anyio_backend: str) -> None:
    """A pool's thread holds its slot until it ends, whoever stopped waiting for it; the shared
    worker pool lends none of its threads."""
    import threading

    pool = WorkPool("loads", 2, wait_seconds=0.3)
    release = threading.Event()
    running = []

    def block(_: Any) -> int:
        running.append(1)
        release.wait(20)
        return 1

    shared = anyio.to_thread.current_default_thread_limiter()
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(pool.run, block)
        with anyio.fail_after(10):
            while pool.busy < 2:
                await anyio.sleep(0.01)
        assert shared.borrowed_tokens == 0
        with pytest.raises(PoolBusy):  # a third waits at most wait_seconds, then is refused
            await pool.run(block)
        with anyio.move_on_after(0.05):  # a caller gone: its thread still holds the slot
            await pool.run(block)
        assert pool.busy == 2
        release.set()
    with anyio.fail_after(10):
        while pool.busy:
            await anyio.sleep(0.01)
    assert len(running) == 2


async def test_a_huge_file_is_measured_before_it_is_read(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 2: `data=PATH|preset=btc_bars` skipped the sniff and read a 5 GB sparse file."""
    huge = tmp_path / "huge.csv"
    with open(huge, "wb") as f:
        f.write(b"timestamp,open,high,low,close,volume\n")
        f.truncate(DEFAULT_LIMITS.max_file_bytes + 1)  # sparse: no disk used
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with connect([tmp_path]) as c:
        for name in ("huge.csv|preset=btc_bars", "huge.csv"):
            text = await refusal(c, "simulate", plan=PLAN, data=name)
            assert "over the limit" in text, text
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, f"the refusal cost {grown_mb:.0f} MB"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_a_csv_of_many_short_rows_is_counted_before_it_is_split(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 2, on the rows of a CSV: 60 MB of three-byte lines split into 20 million
    strings took 1.5 GB before the row cap was checked. The server counts them on the bytes."""
    rows = tmp_path / "rows.csv"
    with open(rows, "wb") as f:
        f.write(b"ts,price\n" + b"12\n" * (4 * DEFAULT_LIMITS.max_rows))
    with mcp_server(tmp_path, f"--data-root={tmp_path}") as server:
        async with client(server.url, TOKEN_A) as c:
            base = _peak_rss_mb(server.proc.pid)
            started = time.monotonic()
            text = await refusal(c, "simulate", plan=PLAN, data="rows.csv|preset=truefx")
            took = time.monotonic() - started
        grown = _peak_rss_mb(server.proc.pid) - base
    assert f"number of data rows {4 * DEFAULT_LIMITS.max_rows:,} is over the limit" in text, text
    assert grown < 400, f"the refusal took {grown:.0f} MB"
    assert took < 10


async def test_a_parquet_bomb_is_refused_from_its_footer(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 2: 423 KB of Parquet decompressed to 4.56 GB."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = DEFAULT_LIMITS.max_rows + 1
    table = pa.table({"timestamp": pa.array([0] * rows, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                      "bid": pa.array([1.0] * rows), "ask": pa.array([1.0] * rows)})
    bomb = tmp_path / "bomb.parquet"
    pq.write_table(table, bomb, compression="zstd")
    del table
    assert bomb.stat().st_size < 2_000_000
    async with connect([tmp_path]) as c:
        started = time.monotonic()
        text = await refusal(c, "simulate", plan=PLAN, data="bomb.parquet|preset=truefx")
        assert time.monotonic() - started < 10
    assert f"number of data rows {rows:,} is over the limit" in text


async def test_a_header_of_a_million_columns_makes_a_short_error(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 2: a CSV header of 10M columns made a 79 MB one-line error."""
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n" + "1," * 10 + "1\n")
    async with connect([tmp_path]) as c:
        text = await refusal(c, "simulate", plan=PLAN, data="wide.csv")  # sniffed: its first 4 KB
        assert len(text) <= DEFAULT_LIMITS.max_error_chars and "c1," not in text
        text = await refusal(c, "simulate", plan=PLAN, data="wide.csv|preset=truefx")  # read: counted first
        assert len(text) <= DEFAULT_LIMITS.max_error_chars
        assert "number of columns 1,000,000 is over the limit" in text


def test_the_cli_still_reads_any_path_and_keeps_its_errors_short(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI, run by its user on their own files, has no roots; a wide header is still a
    short error there."""
    from kestrel.cli import main

    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(200_000)) + "\n1,2\n")
    dup = tmp_path / "dup.csv"
    dup.write_text("x" * 100_000 + "," + "x" * 100_000 + "\n1,1\n")
    for path, preset in ((wide, "truefx"), (dup, "truefx")):
        capsys.readouterr()
        assert main(["simulate", "--data", str(path), "--preset", preset, "--json"]) == 2
        err = capsys.readouterr().err
        assert len(err) < 1000 and err.count("\n") == 1, err[:300]
    q = quotes_csv(tmp_path / "q.csv")
    assert main(["view", "VIEW v: quote", "--data", str(q), "--preset", "truefx", "--at", "09:40"]) == 0


async def test_another_user_reads_no_root_only_file_over_http(anyio_backend: str, tmp_path: Path) -> None:
    """Observation 1 as it was found: a second local user, through the server root runs, asked
    for a root-only `.env`. Without the token the server answers nothing; the token file is the
    owner's only; with a token, the file outside the roots is refused without its content."""
    uid = second_user()
    served = tmp_path / "data"
    served.mkdir()
    env = tmp_path / ".env"
    env.write_text(SECRET + "\n")
    env.chmod(0o600)
    attack = '''
import http.client, json, sys
port, tokens, env = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    open(tokens).read(); print("TOKEN FILE READ")
except PermissionError:
    print("token file: permission denied")
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "view", "arguments": {"view": "VIEW v: quote", "at": "10:30", "data": env}}})
for headers in ({}, {"Authorization": "Bearer guessed-" + "0" * 40}):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("POST", "/mcp", body, {"content-type": "application/json", "accept": "application/json, text/event-stream",
                                      "mcp-protocol-version": "2025-11-25", **headers})
    r = c.getresponse()
    print(r.status, r.read().decode()[:500])
'''
    public = Path(tempfile.mkdtemp(prefix="kestrel-sec-"))  # a folder the other user can enter
    try:
        public.chmod(0o755)
        with mcp_server(public, f"--data-root={served}") as server:
            out = run_as(uid, attack, str(server.port), str(public / "tokens"), str(env))
            async with client(server.url, TOKEN_A) as c:
                text = await refusal(c, "view", data=str(env), **VIEW)
    finally:
        shutil.rmtree(public, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    assert "token file: permission denied" in out.stdout
    assert out.stdout.count("401 ") == 2 and "sk-live" not in out.stdout
    assert "outside this server's data roots" in text and "sk-live" not in text


def test_a_fifo_put_where_a_file_was_checked_never_blocks_a_bounded_load(tmp_path: Path) -> None:
    """A FIFO swapped in after the roots' check: a server's load opens it without blocking and
    refuses it; the CLI (unbounded) still reads a pipe, as `--data <(...)` needs."""
    import subprocess
    import sys
    import threading

    from kestrel.data.errors import DataError
    from kestrel.data.readers import bounded_reads, detect_preset, read_bytes

    fifo = tmp_path / "swapped.csv"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes | str] = []

    def load() -> None:
        with bounded_reads(DEFAULT_LIMITS.reads()):
            for read in (read_bytes, detect_preset):
                try:
                    outcome.append(read(fifo))
                except BaseException as exc:  # noqa: BLE001 - recorded for the asserts
                    outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader before failing
        with open(fifo, "wb"):
            pass
        worker.join(10)
        raise AssertionError("a bounded load blocked on a FIFO")
    assert len(outcome) == 2 and all(isinstance(o, DataError) and "not a regular file" in str(o)
                                     for o in outcome), outcome
    rows = "timestamp,bid,ask\n" + "".join(f"2024-04-15T13:{m:02d}:00Z,1.1,1.1002\n" for m in range(60))
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'w').write({rows!r})"])
    try:
        assert read_bytes(fifo).decode() == rows  # unbounded: the CLI's read of a pipe
    finally:
        writer.wait(10)
