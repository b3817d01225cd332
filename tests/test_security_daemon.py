"""Security: the daemon against its disk, its data and its home (observations 6 and 7).

A full disk (a real one: a small tmpfs, mounted for the test and unmounted after, where the
machine allows it) pauses the runs and never the daemon, at run time and at restart, and
nothing acknowledged is lost once space returns; one bad stored run fails alone at resume; a
reply over the 1 MiB line limit arrives in parts that `ctl` joins; a home another user can
write is refused, files are opened without following symlinks and created 0600, a foreign or
damaged store is refused before anything is written to it, and a planted run never resumes."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path


import msgspec
import pytest

from daemon_support import DaemonProcess as Daemon
from kestrel.cli import main
from kestrel.cli.daemon import SimulatePlanner
from kestrel.service.daemon.protocol import MAX_LINE, NoParams, RunParams, SubmitParams, WaitParams
from kestrel.service.daemon.store import NewRun, Store, run_mac
from security_support import NOBODY, ROOT

FLAGS = ["--checkpoints", "10:30,12:00,14:00"]


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    made: list[Daemon] = []
    yield made
    for d in made:
        d.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB tmpfs of its own (mode 0700), unmounted at the end; skips where mounting is not
    allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.getuid() != 0:
        pytest.skip("a full disk needs a small file system of its own: mounting one needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path) -> Path:
    """Fill `disk` to the last byte (bounded by its size); the filler file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        block = b"\0" * (1 << 20)
        try:
            for _ in range(64):
                f.write(block)
        except OSError:
            pass
        try:
            for _ in range(1 << 12):
                f.write(b"\0" * 256)
        except OSError:
            pass
    return filler


def simulate_ledger(tmp_path: Path, flags: list[str]) -> bytes:
    ledger = tmp_path / "simulate.ledger.jsonl"
    assert main(["simulate", *flags, "--ledger", str(ledger), "--json"]) == 0
    return ledger.read_bytes()


def test_a_full_disk_pauses_the_runs_never_the_daemon(small_disk: Path, tmp_path: Path, daemons: list[Daemon],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 6: `sqlite3.OperationalError` escaped and killed the daemon, again at every
    restart while the disk was full."""
    expected = simulate_ledger(tmp_path, FLAGS)
    capsys.readouterr()
    d = Daemon(small_disk / "home")
    daemons.append(d)
    d.start()
    with d.client() as c:
        run = c.call("submit", SubmitParams([*FLAGS, "--pace", "1000"], str(ROOT)))["run"]
        deadline = time.monotonic() + 60
        while c.call("show", RunParams(run))["turns"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    filler = fill(small_disk)
    with d.client() as c:  # the writer pauses: submits are refused with the reason, reads answer
        deadline = time.monotonic() + 60
        while True:
            try:
                c.call("submit", SubmitParams(FLAGS, str(ROOT)))
            except Exception as exc:
                assert "cannot write now" in str(exc), exc
                break
            assert time.monotonic() < deadline, "the store never paused"
            time.sleep(0.2)
        assert c.call("show", RunParams(run))["state"] == "running"
    time.sleep(1)
    assert d.proc is not None and d.proc.poll() is None  # alive
    d.kill9()
    d.start()  # restarts while the disk is still full, and serves
    with d.client() as c:
        assert c.call("ping", NoParams())["ok"] is True
        assert run in {r["run"] for r in c.call("runs", NoParams())["runs"]}
    filler.unlink()  # space returns
    with d.client(timeout=180) as c:
        info = c.call("wait", WaitParams(run, 120))
        assert info["state"] == "done", info
        out = c.call("export", RunParams(run))
    assert out["ledger"].encode() == expected  # nothing lost, nothing twice
    assert d.proc is not None and d.proc.poll() is None


def _paced_runs(d: Daemon, n: int) -> list[str]:
    with d.client() as c:
        runs = [c.call("submit", SubmitParams([*FLAGS, "--pace", "1500"], str(ROOT)))["run"] for _ in range(n)]
        deadline = time.monotonic() + 60
        while min(c.call("show", RunParams(r))["turns"] for r in runs) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    return runs


def test_one_bad_stored_run_fails_alone_at_resume(tmp_path: Path, daemons: list[Daemon],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 6: resume caught only ValueError, so one bad row made every start exit 70."""
    expected = simulate_ledger(tmp_path, FLAGS)
    home = tmp_path / "home"
    d = Daemon(home)
    daemons.append(d)
    d.start()
    bad_flags, bad_turn, good = _paced_runs(d, 3)
    d.kill9()
    key = (home / "kestrel.key").read_bytes()
    db = sqlite3.connect(home / "kestrel.db", isolation_level=None)
    _, argv, pace = db.execute("SELECT flags, argv, pace FROM runs WHERE id = ?", (bad_flags,)).fetchone()
    garbage = b"[not flags"
    db.execute("UPDATE runs SET flags = ?, mac = ? WHERE id = ?",
               (garbage, run_mac(key, bad_flags, garbage, argv, pace), bad_flags))  # signed, undecodable
    db.execute("UPDATE events SET body = ? WHERE run = ? AND kind = 'turn'", (b"{\"not\": 1}", bad_turn))
    db.close()
    d.start()
    with d.client(timeout=180) as c:
        assert c.call("wait", WaitParams(good, 120))["state"] == "done"
        assert c.call("export", RunParams(good))["ledger"].encode() == expected
        shown = {r: c.call("show", RunParams(r)) for r in (bad_flags, bad_turn)}
    assert shown[bad_flags]["state"] == "failed" and "stored flags do not decode" in shown[bad_flags]["reason"]
    assert shown[bad_turn]["state"] == "failed" and "committed turn does not decode" in shown[bad_turn]["reason"]


REPLAN = ("PLAN churn RISK maxpos 400 maxloss 100000\n"
          "WHEN last > 0: BUY 1 MKT STOP -0.01 TARGET +0.01 x100\n"
          "WHEN last > 0: SELL 1 MKT STOP +0.01 TARGET -0.01 x100\n"
          "WHEN last > 0: BUY 2 MKT STOP -0.02 TARGET +0.02 x100\n")


def test_replies_over_the_line_limit_arrive_in_parts(tmp_path: Path, daemons: list[Daemon],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 6: after one legitimate long run, show/wait/export/follow/runs failed with
    an internal error (replies of megabytes on a 1 MiB line protocol)."""
    checkpoints = ",".join(f"{h:02d}:{m:02d}" for h in range(10, 16) for m in range(0, 60, 6))
    replies = tmp_path / "replan.txt"
    # a new name each turn: a restated plan is kept, a renamed one re-arms (and fills again)
    replies.write_text("\n---\n".join(REPLAN.replace("PLAN churn", f"PLAN churn{i}", 1) for i in range(2 * 6 * 61)))
    flags = ["--agent", f"replies:{replies}", "--days", "6", "--checkpoints", checkpoints]
    expected = simulate_ledger(tmp_path, flags)
    assert len(expected) > MAX_LINE
    home = tmp_path / "home"
    d = Daemon(home)
    daemons.append(d)
    d.start()
    with d.client(timeout=300) as c:
        run = c.call("submit", SubmitParams(flags, str(ROOT)))["run"]
        assert c.call("wait", WaitParams(run, 240))["state"] == "done"
    # the raw protocol: no line over the limit
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(home / "kestrel.sock"))
        f = s.makefile("rwb")
        for i, (method, params) in enumerate((("hello", {"protocol": 1}), ("export", {"run": run})), 1):
            f.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
            f.flush()
            parts = 0
            while True:
                line = f.readline(MAX_LINE + 2)
                assert line.endswith(b"\n") and len(line) <= MAX_LINE
                msg = json.loads(line)
                if msg.get("method") == "part":
                    parts += 1
                    if not msg["params"]["last"]:
                        continue
                break
            assert (parts > 1) == (method == "export")
    capsys.readouterr()
    out = tmp_path / "out"
    out.mkdir()
    for argv in (["show", run, "--json"], ["runs", "--json"], ["wait", run], ["follow", run, "--json"],
                 ["export", run, "--ledger", str(out / "l"), "--capture", str(out / "c")]):
        assert main(["ctl", "--home", str(home), *argv]) == 0, (argv, capsys.readouterr().err)
    assert (out / "l").read_bytes() == expected


def test_a_home_others_can_write_is_refused(tmp_path: Path) -> None:
    """Observation 7: in a world-writable home another user planted the daemon's files."""
    home = tmp_path / "open"
    home.mkdir()
    home.chmod(0o777)
    out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(home)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "writable by other users" in out.stderr and out.stderr.count("\n") == 1
    assert list(home.iterdir()) == []  # nothing created in it
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # a parent anyone can write, not sticky: anyone can swap the home
    out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(shared / "home")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "above the home" in out.stderr
    assert not (shared / "home").exists()


def test_planted_symlinks_are_never_followed(tmp_path: Path) -> None:
    """Observation 7: `kestrel.lock` and `daemon.log` planted as symlinks; their targets were
    truncated or appended to."""
    for name in ("kestrel.lock", "daemon.log", "kestrel.db", "kestrel.key"):
        home = tmp_path / f"home-{name}"
        home.mkdir(mode=0o700)
        target = tmp_path / f"victim-{name}"
        target.write_text("precious\n")
        (home / name).symlink_to(target)
        if os.getuid() == 0:
            os.lchown(home / name, NOBODY, NOBODY)  # planted by another user
        out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(home)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert "symbolic link" in out.stderr and out.stderr.count("\n") == 1
        assert target.read_text() == "precious\n"


def test_the_daemons_files_are_owner_only(tmp_path: Path, daemons: list[Daemon]) -> None:
    """Observation 7: database files were created 0644."""
    home = tmp_path / "home"
    d = Daemon(home)
    daemons.append(d)
    d.start()
    with d.client() as c:
        run = c.call("submit", SubmitParams(FLAGS, str(ROOT)))["run"]
        assert c.call("wait", WaitParams(run, 120))["state"] == "done"
    modes = {p.name: p.stat().st_mode & 0o777 for p in home.iterdir()}
    assert modes.pop("kestrel.sock") == 0o600
    assert set(modes) >= {"kestrel.lock", "daemon.log", "kestrel.db", "kestrel.key"}
    assert set(modes.values()) == {0o600}, modes
    assert home.stat().st_mode & 0o777 == 0o700


def test_a_foreign_or_damaged_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Observation 7: a refused database was modified first (WAL set), and a foreign SQLite
    file was adopted."""
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    conn = sqlite3.connect(foreign / "kestrel.db")
    conn.execute("CREATE TABLE accounts (name TEXT, balance REAL)")
    conn.execute("INSERT INTO accounts VALUES ('me', 1)")
    conn.commit()
    conn.close()
    lookalike = tmp_path / "lookalike"  # our tables, and one more
    lookalike.mkdir(mode=0o700)
    store = Store(lookalike / "kestrel.db")
    store.close()
    conn = sqlite3.connect(lookalike / "kestrel.db")
    conn.execute("CREATE TABLE extra (x)")
    conn.commit()
    conn.close()
    def files(home: Path) -> dict[str, tuple[bytes, int]]:
        return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in home.iterdir()
                if p.name.startswith("kestrel.db")}

    for home in (foreign, lookalike):
        before = files(home)
        out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(home)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "not a Kestrel store" in out.stderr, out.stderr
        after = files(home)
        assert {k: v for k, v in after.items() if not k.endswith("-shm")} == \
            {k: v for k, v in before.items() if not k.endswith("-shm")}  # (a reader's shared-memory index aside)
    header = (foreign / "kestrel.db").read_bytes()[:20]
    assert header[18:20] == b"\x01\x01"  # still a rollback-journal file: WAL was never set
    assert not (foreign / "kestrel.db-wal").exists()


class Listener:
    """A loopback socket that counts who connects (the attacker's 'model endpoint')."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _run(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stopped = True
        self.thread.join(5)
        self.sock.close()


def test_a_planted_run_never_resumes(tmp_path: Path, daemons: list[Daemon]) -> None:
    """Observation 7: a planted `kestrel.db` held a run that resumed unasked, sent the owner's API
    key to a listener of the attacker's choosing and wrote files where the attacker chose."""
    pytest.importorskip("openai")
    listener = Listener()
    loot = tmp_path / "loot.jsonl"
    try:
        os.environ["OPENAI_API_KEY"] = "sk-planted-run-would-steal-this"
        try:
            flags, argv = SimulatePlanner().parse(
                ["--agent", "openai:gpt-4o", "--base-url", listener.url, "--ledger", str(loot)], str(tmp_path))
        finally:
            del os.environ["OPENAI_API_KEY"]
        elsewhere = tmp_path / "elsewhere.db"  # the attacker's store: our schema, another key
        store = Store(elsewhere, key=os.urandom(32))
        enc = msgspec.json.Encoder(order="deterministic")
        store.write([NewRun("r0123456789", enc.encode(flags), enc.encode(argv), "max")])
        store.close()
        home = tmp_path / "home"
        home.mkdir(mode=0o700)
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{elsewhere}{suffix}").exists():
                Path(f"{elsewhere}{suffix}").rename(home / f"kestrel.db{suffix}")
        d = Daemon(home, env={**os.environ, "OPENAI_API_KEY": "sk-owner-secret"})
        daemons.append(d)
        d.start()
        with d.client() as c:
            info = c.call("show", RunParams("r0123456789"))
        time.sleep(2)
    finally:
        listener.close()
    assert info["state"] == "failed" and "not created by this daemon" in info["reason"]
    assert listener.connections == 0
    assert not loot.exists()


def test_a_missing_key_is_named_as_the_daemons(tmp_path: Path, daemons: list[Daemon],
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`ctl submit` names the daemon's environment, whatever the client's shell holds."""
    pytest.importorskip("openai")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    d = Daemon(tmp_path / "home", env=env)
    daemons.append(d)
    d.start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-in-the-clients-shell")
    capsys.readouterr()
    assert main(["ctl", "--home", str(d.home), "submit", "--agent", "openai:gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert "in the daemon's environment: OPENAI_API_KEY is not set where the daemon runs" in err
    assert err.count("\n") == 1 and "restart the daemon with OPENAI_API_KEY set" in err




def test_the_daemon_reads_data_only_under_its_roots(tmp_path: Path, daemons: list[Daemon],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 1 for the daemon: `ctl submit --data` of a file outside `--data-root` (or
    through a link out of it, or a kernel file) is refused in one line that says nothing of it;
    a file under the root runs, recorded by its real path."""
    served = tmp_path / "served"
    served.mkdir()
    secret = tmp_path / "secret.csv"
    secret.write_text("OPENAI_API_KEY=sk-live-secret,x\n1,2\n")
    secret.chmod(0o600)
    (served / "link.csv").symlink_to(secret)
    rows = "timestamp,bid,ask\n" + "".join(
        f"2024-04-15T{13 + i // 60:02d}:{i % 60:02d}:00Z,{1.1 + i * 1e-4:.5f},{1.1 + i * 1e-4 + 2e-4:.5f}\n"
        for i in range(240))
    (served / "q.csv").write_text(rows)
    bare = Daemon(tmp_path / "bare")
    daemons.append(bare)
    bare.start()
    capsys.readouterr()
    assert main(["ctl", "--home", str(bare.home), "submit", "--data", str(served / "q.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--data-root" in err, err
    d = Daemon(tmp_path / "home", f"--data-root={served}")
    daemons.append(d)
    d.start()
    for name in (str(secret), str(served / "link.csv"), str(served / ".." / "secret.csv"), "/proc/self/environ",
                 str(tmp_path / "nosuch.csv")):
        capsys.readouterr()
        assert main(["ctl", "--home", str(d.home), "submit", "--data", name, "--preset", "truefx"]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "sk-live" not in err and "Traceback" not in err, err
        assert "outside" in err or "kernel" in err, err
    capsys.readouterr()
    assert main(["ctl", "--home", str(d.home), "submit", "--data", str(served / "q.csv"), "--preset", "truefx"]) == 0
    run = capsys.readouterr().out.split()[-1]  # the run id, printed last
    with d.client() as c:
        c.call("wait", WaitParams(run, timeout=60))
        info = c.call("show", RunParams(run))
    assert info["state"] == "done", info
    assert str((served / "q.csv").resolve()) in json.dumps(info)
