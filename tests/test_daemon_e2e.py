"""The daemon as a real subprocess (asyncio and trio): kill -9 at random points over several
rounds, restart, and every acknowledged turn and fill is still there, every run completes, and
every ledger equals `kestrel simulate` with the same flags; a second instance; SIGTERM; a peer
of another uid; `kestrel ctl` end to end; real EUR/USD data, paced."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon_support import DaemonProcess as Daemon
from kestrel.cli import main
from kestrel.cli.ctl import Client, CtlError
from kestrel.service.daemon.protocol import RunParams, SubmitParams, WaitParams

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["asyncio", "trio"]


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[Daemon] = []

    def make(backend: str, name: str = "home", roots: tuple[Path, ...] = ()) -> Daemon:
        d = Daemon(tmp_path / name, backend=backend, roots=roots)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()


def simulate_files(tmp_path: Path, name: str, flags: list[str]) -> tuple[bytes, bytes]:
    """`kestrel simulate FLAGS` in process: (ledger, capture)."""
    ledger, capture = tmp_path / f"{name}.ledger", tmp_path / f"{name}.capture"
    assert main(["simulate", *flags, "--json", "--ledger", str(ledger), "--capture", str(capture)]) == 0
    return ledger.read_bytes(), capture.read_bytes()


class Follower(threading.Thread):
    """Follows a run until the daemon goes away, recording every acknowledged record (and
    any record that came back different after a restart, in `changed`)."""

    def __init__(self, d: Daemon, run: str, acked: dict[tuple[str, str, str], str], changed: list[str]) -> None:
        super().__init__(daemon=True)
        self.d, self.run_id, self.acked, self.changed = d, run, acked, changed

    def run(self) -> None:
        def seen(item: dict[str, Any]) -> None:
            body = json.dumps(item["body"], sort_keys=True)
            key = (self.run_id, item["kind"], item["key"])
            if self.acked.setdefault(key, body) != body:
                self.changed.append(f"{key} changed after it was acknowledged")

        try:
            with Client(self.d.home / "kestrel.sock", timeout=None) as c:
                c.call("follow", RunParams(self.run_id), on_event=seen)
        except (OSError, CtlError, ValueError):  # killed under us: what was acknowledged is recorded
            pass


RUNS = [
    ["--checkpoints", "11:00,13:30"],
    ["--agent", "fixed:examples/orb_breakout.kes", "--checkpoints", "11:00", "--latency", "40", "--slippage", "1"],
    ["--data", "sample", "--seed", "7", "--checkpoints", "10:30,12:00,14:00", "--maxpos", "40",
     "--fee-per-order", "0.5"],
]


def replays(tmp_path: Path, name: str, ledger: bytes, capture: bytes) -> None:
    """`kestrel replay CAPTURE --expect-ledger LEDGER` accepts an exported run (its data
    source and engine config are in the header) and reproduces its ledger."""
    (tmp_path / f"{name}.x.ledger").write_bytes(ledger)
    (tmp_path / f"{name}.x.capture").write_bytes(capture)
    assert main(["replay", str(tmp_path / f"{name}.x.capture"), "--json", "--backend", "direct",
                 "--expect-ledger", str(tmp_path / f"{name}.x.ledger")]) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill9_rounds_lose_nothing_and_ledgers_equal_simulate(backend: str, tmp_path: Path, daemon_factory: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the fixed plan's path is relative: the client makes it absolute
    rng = random.Random(f"kill9-{backend}")
    expected = [simulate_files(tmp_path, f"ref{i}", flags) for i, flags in enumerate(RUNS)]
    d = daemon_factory(backend)
    d.start()
    with d.client() as c:
        runs = [c.call("submit", SubmitParams([*flags, "--pace", "5000"], str(ROOT)))["run"] for flags in RUNS]
    acked: dict[tuple[str, str, str], str] = {}
    changed: list[str] = []
    for _round in range(4):
        followers = [Follower(d, r, acked, changed) for r in runs]
        for f in followers:
            f.start()
        time.sleep(rng.uniform(0.4, 2.0))
        d.kill9()
        for f in followers:
            f.join(10)
        assert (d.home / "kestrel.sock").exists()  # a stale socket is left behind ...
        d.start()  # ... and replaced
    assert acked, "nothing was acknowledged before the kills"
    assert changed == []
    with d.client() as c:
        infos = [c.call("wait", WaitParams(r, 120)) for r in runs]
        assert [i["state"] for i in infos] == ["done"] * len(runs)
        assert sum(i["resumed"] for i in infos) >= 1
        exported = [c.call("export", RunParams(r)) for r in runs]
    lost = 0
    for run, (ledger, capture), out in zip(runs, expected, exported, strict=True):
        assert out["ledger"].encode() == ledger
        assert out["capture"].encode() == capture
        replays(tmp_path, run, ledger, capture)
        lines = ledger.decode().splitlines()
        turns = [json.loads(x) for x in capture.decode().splitlines()[1:]]
        for (r, kind, key), body in acked.items():
            if r != run:
                continue
            if kind == "ledger":
                index = int(key.split("/")[1])
                lost += index >= len(lines) or json.loads(lines[index]) != json.loads(body)
            elif kind == "turn":
                lost += json.loads(body) not in turns
    assert lost == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_instance_exits_2_saying_one_is_running(backend: str, daemon_factory: Any) -> None:
    d = daemon_factory(backend)
    d.start()
    second = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(d.home)],
                            capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert second.returncode == 2
    assert "already running" in second.stderr and str(d.proc.pid) in second.stderr
    assert "Traceback" not in second.stderr
    with d.client() as c:  # the first one is untouched
        assert c.call("ping")["message"] == "pong"


@pytest.mark.parametrize(("backend", "signum"), [("asyncio", signal.SIGTERM), ("trio", signal.SIGTERM),
                                                ("asyncio", signal.SIGINT), ("trio", signal.SIGINT)])
def test_sigterm_exits_0_promptly_and_the_run_resumes(backend: str, signum: signal.Signals,
                                                      daemon_factory: Any) -> None:
    d = daemon_factory(backend)
    d.start()
    with d.client() as c:
        run = c.call("submit", SubmitParams(["--checkpoints", "11:00,13:30", "--pace", "30"], str(ROOT)))["run"]
        deadline = time.monotonic() + 20
        while c.call("show", RunParams(run))["turns"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert d.proc is not None
    start = time.monotonic()
    d.proc.send_signal(signum)
    assert d.proc.wait(15) == 0
    assert time.monotonic() - start < 10
    assert not (d.home / "kestrel.sock").exists()
    log = [json.loads(x) for x in (d.home / "daemon.log").read_text().splitlines()]
    assert any(x["event"] == "daemon.signal" and x["signal"] == signum.name for x in log)
    d.start()
    with d.client() as c:
        info = c.call("show", RunParams(run))
        assert (info["state"], info["resumed"], info["turns"]) == ("running", 1, 1)
        assert c.call("cancel", RunParams(run))["state"] == "cancelled"


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="needs root (to connect as another user) and a system python3")
def test_a_peer_of_another_user_is_refused_by_uid() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="kestrel-peer-"))  # pytest's tmp folders are root-only
    base.chmod(0o755)
    d = Daemon(base / "home", backend="asyncio")
    try:
        _peer_probe(d)
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def _peer_probe(d: Daemon) -> None:
    d.start()
    assert stat.S_IMODE((d.home / "kestrel.sock").stat().st_mode) == 0o600
    d.home.chmod(0o755)  # open the doors on purpose: the uid check must still refuse
    (d.home / "kestrel.sock").chmod(0o666)
    probe = (
        "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
        "print(s.makefile().readline().strip())"  # refused before it says anything
    )
    out = subprocess.run(["/usr/bin/python3", "-c", probe, str(d.home / "kestrel.sock")], user=65534,
                         group=65534, extra_groups=[], cwd="/", capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["error"]["code"] == -32000 and "peer uid 65534" in reply["error"]["message"]
    log = (d.home / "daemon.log").read_text()
    assert '"connection.refused"' in log and '"peer_uid":65534' in log


def test_ctl_end_to_end(tmp_path: Path, daemon_factory: Any, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = str(tmp_path / "home")
    assert main(["ctl", "--home", home, "ping"]) == 1
    assert "no daemon is running" in capsys.readouterr().err
    d = daemon_factory("asyncio")
    d.start()
    assert main(["ctl", "--home", home, "ping"]) == 0
    assert "pong" in capsys.readouterr().out
    monkeypatch.chdir(ROOT)
    flags = ["--agent", "fixed:examples/orb_breakout.kes", "--checkpoints", "11:00"]
    assert main(["ctl", "--home", home, "submit", *flags, "--pace", "8000"]) == 0
    run = capsys.readouterr().out.splitlines()[-1]  # the run id on the last line
    assert main(["ctl", "--home", home, "follow", run]) == 0
    followed = capsys.readouterr().out.splitlines()
    assert followed[0].startswith("turn  ") and "OPEN: PLAN" in followed[0]
    assert any(line.startswith("fill  ") for line in followed) and followed[-1].startswith("end   done")
    assert main(["ctl", "--home", home, "wait", run, "--timeout", "30"]) == 0
    assert main(["ctl", "--home", home, "show", run, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert shown["state"] == "done" and shown["pace"] == "8000"
    assert main(["ctl", "--home", home, "show", run]) == 0
    rows = capsys.readouterr().out.splitlines()  # one row per summary leaf, not one JSON line
    total = [r.split() for r in rows if r.startswith("total.fills ")]
    assert total == [["total.fills", str(shown["summary"]["total"]["fills"])]]
    assert rows[-1].startswith("also in the summary: ") and "days" in rows[-1]
    assert all(len(r) < 200 for r in rows)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["ctl", "--home", home, "export", run, "--ledger", str(out / "l"), "--capture", str(out / "c"),
                 "--evidence", str(out / "e")]) == 0
    ledger, capture = simulate_files(tmp_path, "ref", flags)
    assert (out / "l").read_bytes() == ledger and (out / "c").read_bytes() == capture
    assert main(["ctl", "--home", home, "runs"]) == 0
    assert run in capsys.readouterr().out
    monkeypatch.chdir(out)  # output flags of submit: relative to the client, written at the end
    assert main(["ctl", "--home", home, "submit", "--agent", str(ROOT / "examples" / "orb_breakout.kes").join(["fixed:", ""]),
                 "--checkpoints", "11:00", "--ledger", "mine.jsonl", "--capture", "mine.capture"]) == 0
    second = capsys.readouterr().out.splitlines()[-1]
    assert main(["ctl", "--home", home, "wait", second]) == 0
    assert (out / "mine.jsonl").read_bytes() == ledger and (out / "mine.capture").read_bytes() == capture
    monkeypatch.chdir(ROOT)
    for argv, code, says in [
        (["show", "r-nope"], 2, "unknown run"),
        (["submit", "--checkpoints", "99:00"], 2, "99:00"),
        (["submit", "--bogus"], 2, "unrecognized arguments"),
        (["export", run, "--ledger", str(tmp_path / "no" / "l"), "--capture", str(out / "c")], 2, "no such directory"),
        (["cancel", run], 2, "nothing to cancel"),
    ]:
        assert main(["ctl", "--home", home, *argv]) == code, argv
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err
    assert main(["ctl", "--home", home, "shutdown"]) == 0
    assert d.proc is not None and d.proc.wait(20) == 0


def test_real_eurusd_paced_killed_and_resumed_equals_simulate(shared_data: Path, tmp_path: Path,
                                                              daemon_factory: Any) -> None:
    data = shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
    flags = ["--data", str(data), "--days", "2", "--checkpoints", "11:00"]
    ledger, capture = simulate_files(tmp_path, "eurusd", flags)
    d = daemon_factory("trio", roots=(shared_data,))
    d.start()
    with d.client() as c:
        run = c.call("submit", SubmitParams([*flags, "--pace", "30000"], str(ROOT)))["run"]
        deadline = time.monotonic() + 60
        while c.call("show", RunParams(run))["turns"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    d.kill9()
    d.start()
    with d.client() as c:
        assert c.call("wait", WaitParams(run, 120))["state"] == "done"
        out = c.call("export", RunParams(run))
    assert out["ledger"].encode() == ledger and out["capture"].encode() == capture
    assert json.loads(capture.splitlines()[0])["source"]["sha256"]  # the file's hash is recorded
    replays(tmp_path, "eurusd", ledger, capture)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_resumed_run_plays_its_agent_file_as_it_was_at_submit(backend: str, tmp_path: Path,
                                                                daemon_factory: Any) -> None:
    # a recorded agent answers every ordinal from its file: were the file re-read on resume,
    # the edit below would change the turns after the kill (and the capture header's agent)
    checks = ["--checkpoints", "11:00,13:30"]
    plan = ["--agent", f"fixed:{ROOT / 'examples' / 'orb_breakout.kes'}", *checks]
    simulate_files(tmp_path, "orb", plan)
    simulate_files(tmp_path, "base", checks)
    agent_file = tmp_path / "agent.capture"
    agent_file.write_bytes((tmp_path / "orb.capture").read_bytes())
    flags = ["--agent", f"recorded:{agent_file}", *checks]
    ledger, capture = simulate_files(tmp_path, "ref", flags)
    d = daemon_factory(backend)
    d.start()
    with d.client() as c:
        run = c.call("submit", SubmitParams([*flags, "--pace", "3000"], str(ROOT)))["run"]
        deadline = time.monotonic() + 30
        while c.call("show", RunParams(run))["turns"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
    agent_file.write_bytes((tmp_path / "base.capture").read_bytes())  # edited after submit
    d.kill9()
    d.start()
    with d.client() as c:
        info = c.call("wait", WaitParams(run, 120))
        assert (info["state"], info["resumed"]) == ("done", 1)
        out = c.call("export", RunParams(run))
    assert out["ledger"].encode() == ledger and out["capture"].encode() == capture


def test_a_damaged_store_stops_the_daemon_with_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "kestrel.db").write_bytes(b"not a database at all " * 200)
    out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(home)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2
    assert "kestrel.db" in out.stderr and "move the file away" in out.stderr
    assert "Traceback" not in out.stderr
    assert (home / "kestrel.db").read_bytes() == b"not a database at all " * 200  # untouched


def test_a_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = subprocess.run([sys.executable, "-m", "kestrel", "daemon", "--home", str(tmp_path / "file")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "kestrel daemon: home" in out.stderr and "Traceback" not in out.stderr
