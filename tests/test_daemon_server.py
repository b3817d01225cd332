"""The daemon in process (a real socket, a real store, a real host) on asyncio and trio: the
socket's permissions and peer check, bad input of every kind, submit/wait/export/follow/cancel,
and a restart that resumes a run without calling its agent again for committed turns."""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon_support import Conn, running_daemon, submit_params
from kestrel.agents.baseline import BaselineAgent
from kestrel.cli.daemon import SimulatePlanner
from kestrel.service.daemon.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_LINE,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REFUSED,
    TIMED_OUT,
)
from kestrel.data import load_sample
from kestrel.logs import json_sink
from kestrel.session.protocol import AgentReply, AuthorRequest
from kestrel.session.runner import SessionOptions, evidence_logger, run_session

pytestmark = pytest.mark.anyio
CHECKS = ("--checkpoints", "11:00,13:30")


def reference(tmp: Path) -> tuple[bytes, bytes, bytes]:
    """`kestrel simulate --checkpoints 11:00,13:30` (the CLI, in process, direct: the same bytes as
    on actors): ledger, capture, evidence."""
    from kestrel.cli import main

    paths = [tmp / "ref.ledger", tmp / "ref.capture", tmp / "ref.evidence"]
    argv = ["simulate", "--checkpoints", "11:00,13:30", "--json", "--backend", "direct", "--ledger", str(paths[0]),
            "--capture", str(paths[1]), "--evidence", str(paths[2])]
    assert main(argv) == 0
    ledger, capture, evidence = (p.read_bytes() for p in paths)
    return ledger, capture, evidence


async def test_socket_is_owner_only_and_the_log_is_json_lines(anyio_backend: str, tmp_path: Path) -> None:
    from kestrel.service.daemon.home import Home, configure_logs

    home = tmp_path / "home"
    log = configure_logs(Home(tmp_path), console=open(os.devnull, "w"))  # noqa: SIM115
    async with running_daemon(home) as (daemon, _):
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        sock = home / "kestrel.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        async with Conn.open(sock) as c:
            assert (await c.result("ping"))["message"] == "pong"
    assert not sock.exists()  # removed on shutdown
    log.close()
    lines = [json.loads(x) for x in (tmp_path / "daemon.log").read_text().splitlines()]
    assert {"daemon.started", "daemon.stopping", "daemon.stopped"} <= {x["event"] for x in lines}
    assert all("timestamp" in x and x["level"] for x in lines)


async def test_a_peer_of_another_uid_is_refused(anyio_backend: str, tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "h", allowed_uid=os.getuid() + 1):
        async with Conn.open(tmp_path / "h" / "kestrel.sock", hello=False) as c:
            first = await c.line()  # refused before it says anything
            assert first is not None and first["error"]["code"] == REFUSED
            assert f"peer uid {os.getuid()}" in first["error"]["message"]
            assert await c.line() is None  # and the connection is closed


async def test_bad_input_gets_json_errors_and_the_daemon_lives_on(anyio_backend: str, tmp_path: Path) -> None:
    sock = tmp_path / "h" / "kestrel.sock"
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(sock, hello=False) as c:
            await c.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            assert "say hello first" in (await c.line() or {})["error"]["message"]
            cases = [
                (b"garbage\n", PARSE_ERROR),
                (b"\xff\xfe\x00binary\n", PARSE_ERROR),
                (b"[1,2,3]\n", INVALID_REQUEST),
                (b'{"jsonrpc":"2.0","id":2,"method":["ping"]}\n', INVALID_REQUEST),
                (b'{"jsonrpc":"2.0","id":3,"method":"explode"}\n', METHOD_NOT_FOUND),
                (b'{"jsonrpc":"2.0","id":4,"method":"hello","params":{"protocol":"one"}}\n', INVALID_PARAMS),
                (b"[" * 100000 + b"]" * 100000 + b"\n", PARSE_ERROR),  # the decoder's depth limit
                (b"\n", INVALID_REQUEST),
                (b"   \n", INVALID_REQUEST),
            ]
            for raw, code in cases:
                await c.send(raw)
                reply = await c.line()
                assert reply is not None and reply["error"]["code"] == code, (raw, reply)
                assert "Traceback" not in reply["error"]["message"]
            await c.send(b'{"jsonrpc":"2.0","id":5,"method":"hello","params":{"protocol":1}}\n')
            assert (await c.line() or {})["result"]["protocol"] == 1
            for raw, code in [
                (b'{"jsonrpc":"2.0","id":6,"method":"wait","params":{"run":7}}\n', INVALID_PARAMS),
                (b'{"jsonrpc":"2.0","id":7,"method":"show","params":{"run":"nope"}}\n', REFUSED),
                (b'{"jsonrpc":"2.0","id":8,"method":"export","params":{"run":"nope"}}\n', REFUSED),
                (b'{"jsonrpc":"2.0","id":9,"method":"submit","params":{"argv":["--bogus"],"cwd":"/"}}\n', REFUSED),
                (b'{"jsonrpc":"2.0","id":10,"method":"wait","params":{"run":"x","timeout":-1}}\n', REFUSED),
            ]:
                await c.send(raw)
                reply = await c.line()
                assert reply is not None and reply["error"]["code"] == code, (raw, reply)
        async with Conn.open(sock, hello=False) as c:
            await c.send(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":99}}\n')
            assert "protocol 99" in (await c.line() or {})["error"]["message"]
            assert await c.line() is None
        async with Conn.open(sock, hello=False) as c:
            await c.send(b"x" * (MAX_LINE + 10))  # no newline within the cap
            reply = await c.line()
            assert reply is not None and reply["error"]["code"] == INVALID_REQUEST
            assert "over" in reply["error"]["message"]
            assert await c.line() is None
        ping = b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":1}}'
        async with Conn.open(sock, hello=False) as c:  # exactly the cap, newline included: answered
            await c.send(ping + b" " * (MAX_LINE - len(ping) - 1) + b"\n")
            assert (await c.line() or {})["result"]["protocol"] == 1
        for over in (1, 100):  # over the cap by a little, in one chunk with its newline: refused
            async with Conn.open(sock, hello=False) as c:
                await c.send(ping + b" " * (MAX_LINE - len(ping) - 1 + over) + b"\n")
                reply = await c.line()
                assert reply is not None and "over" in reply["error"]["message"], over
                assert await c.line() is None
        async with Conn.open(sock, hello=False) as c:
            await c.send(b'{"jsonrpc":"2.0","id":1,"meth')  # hang up mid-line
        async with Conn.open(sock) as c:
            assert (await c.result("ping"))["ok"] is True


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--checkpoints", "25:00"], "25:00"),
        (["--data", "/nonexistent/ticks.csv"], "reads no data files, only the bundled 'sample'"),
        (["--agent", "fixed:/nonexistent.kes"], "nonexistent.kes"),
        (["--pace", "soon"], "pace"),
        (["--days", "0"], "days"),
        (["--frobnicate"], "frobnicate"),
        (["--ledger", "/proc/x"], "/proc/x"),
        (["--capture", "/nonexistent/dir/c.jsonl"], "no such directory"),
        (["--backend", "direct", "--pace", "5"], "--pace needs the actor feed"),
        (["--report", "r.html"], "--report is not written by the daemon"),
    ],
)
async def test_bad_submissions_are_refused_before_anything_is_stored(
        anyio_backend: str, tmp_path: Path, flags: list[str], says: str) -> None:
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            reply = await c.call("submit", submit_params(*flags))
            assert reply["error"]["code"] == REFUSED and says in reply["error"]["message"]
            assert "kestrel ctl submit" not in reply["error"]["message"]  # ctl adds its prefix once
            assert (await c.result("runs"))["runs"] == []


async def test_submit_wait_export_follow_equal_simulate(anyio_backend: str, tmp_path: Path) -> None:
    ledger, capture, evidence = reference(tmp_path)
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            run = (await c.result("submit", submit_params(*CHECKS)))["run"]
            done = await c.result("wait", {"run": run, "timeout": 60})
            assert done["state"] == "done" and done["turns"] == 3
            assert done["fills"] == ledger.count(b'"event":"fill"') > 0
            out = await c.result("export", {"run": run})
            assert (out["ledger"].encode(), out["capture"].encode(), out["evidence"].encode()) == (ledger, capture, evidence)
            events: list[dict[str, Any]] = []
            reply = await c.call("follow", {"run": run}, events)
            assert reply["result"]["state"] == "done"
            kinds = [e["kind"] for e in events]
            assert kinds[-1] == "end" and kinds.count("turn") == 3
            streamed = b"".join(json.dumps(e["body"], separators=(",", ":")).encode() + b"\n"
                                for e in events if e["kind"] == "ledger")
            assert [json.loads(x) for x in streamed.splitlines()] == [json.loads(x) for x in ledger.splitlines()]
            listed = (await c.result("runs"))["runs"]
            assert [r["run"] for r in listed] == [run] and listed[0]["summary"]["total"]["fills"] == done["fills"]


async def test_follow_streams_a_paced_run_as_it_happens_and_cancel_ends_it(anyio_backend: str, tmp_path: Path) -> None:
    sock = tmp_path / "h" / "kestrel.sock"
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(sock) as c, Conn.open(sock) as watcher:
            run = (await c.result("submit", submit_params(*CHECKS, "--pace", "20")))["run"]  # hours
            reply = await c.call("wait", {"run": run, "timeout": 0.2})
            assert reply["error"]["code"] == TIMED_OUT and "still running" in reply["error"]["message"]
            events: list[dict[str, Any]] = []

            async def follow() -> None:
                events.append((await watcher.call("follow", {"run": run}, events))["result"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                with anyio.fail_after(30):
                    while not any(e.get("kind") == "turn" for e in events):
                        await anyio.sleep(0.02)  # OPEN is streamed while the run goes on
                assert (await c.result("show", {"run": run}))["state"] == "running"
                cancelled = await c.result("cancel", {"run": run})
                assert cancelled["state"] == "cancelled"
            assert events[-2]["kind"] == "end" and events[-2]["body"]["state"] == "cancelled"
            assert events[-1]["state"] == "cancelled"
            again = await c.call("cancel", {"run": run})
            assert again["error"]["code"] == REFUSED
            assert (await c.result("wait", {"run": run}))["state"] == "cancelled"
            # the cancelled run exports what it has: its ledger and turns so far, against the
            # whole run's (simulate's): a prefix of each, under the same header less the checksum
            partial = await c.result("export", {"run": run})
            ledger, capture, evidence = reference(tmp_path)
            got_ledger, got_capture = partial["ledger"].encode(), partial["capture"].encode()
            assert got_ledger and ledger.startswith(got_ledger) and len(got_ledger) < len(ledger)
            head, *turns = [json.loads(x) for x in got_capture.splitlines()]
            ref_head, *ref_turns = [json.loads(x) for x in capture.splitlines()]
            assert head.pop("ledger_sha256") is None and ref_head.pop("ledger_sha256") is not None
            assert head == ref_head
            assert 1 <= len(turns) < len(ref_turns) and turns == ref_turns[:len(turns)]
            assert evidence.decode().startswith(partial["evidence"])


class Counting:
    """The baseline agent, counting how often each (date, ordinal) is asked."""

    iterative = False
    blocking = False
    agent_id = "baseline"
    model = ""
    asked: Counter[str] = Counter()

    def __init__(self) -> None:
        self.inner = BaselineAgent()

    def author(self, request: AuthorRequest) -> AgentReply:
        Counting.asked[request.ordinal] += 1
        return self.inner.author(request)


class CountingPlanner(SimulatePlanner):
    def resolve(self, flags: dict[str, Any]) -> Any:
        job = super().resolve(flags)
        job.agent = Counting()
        return job


async def test_a_restarted_daemon_resumes_without_asking_for_committed_turns(anyio_backend: str, tmp_path: Path) -> None:
    Counting.asked = Counter()
    ledger, capture, _ = reference(tmp_path)
    sock = tmp_path / "h" / "kestrel.sock"
    async with running_daemon(tmp_path / "h", CountingPlanner()) as (_, stop):
        async with Conn.open(sock) as c:
            run = (await c.result("submit", submit_params(*CHECKS, "--pace", "3000")))["run"]
            with anyio.fail_after(30):
                while (await c.result("show", {"run": run}))["turns"] < 2:
                    await anyio.sleep(0.05)
        stop.set()  # the daemon stops mid-run (after OPEN and 11:00 were committed)
    assert Counting.asked["OPEN"] == 1 and Counting.asked["11:00"] == 1
    async with running_daemon(tmp_path / "h", CountingPlanner()):
        async with Conn.open(sock) as c:
            info = await c.result("wait", {"run": run, "timeout": 60})
            assert (info["state"], info["resumed"]) == ("done", 1)
            out = await c.result("export", {"run": run})
    assert out["ledger"].encode() == ledger and out["capture"].encode() == capture
    assert Counting.asked == Counter({"OPEN": 1, "11:00": 1, "13:30": 1})  # nothing asked twice


async def test_shutdown_by_request_stops_the_daemon(anyio_backend: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with running_daemon(tmp_path / "h") as (_, stop):
            async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
                assert (await c.result("shutdown"))["ok"] is True
            await stop.wait()
    assert not (tmp_path / "h" / "kestrel.sock").exists()


class Slow:
    """The baseline agent, taking 0.6 s (on its thread) to author OPEN."""

    iterative = False
    blocking = True
    agent_id = "baseline"
    model = ""

    def __init__(self) -> None:
        self.inner = BaselineAgent()

    def author(self, request: AuthorRequest) -> AgentReply:
        import time

        if request.ordinal == "OPEN":
            time.sleep(0.6)
        return self.inner.author(request)


class SlowPlanner(SimulatePlanner):
    def resolve(self, flags: dict[str, Any]) -> Any:
        job = super().resolve(flags)
        job.agent = Slow()
        return job


async def test_the_submits_agent_timeout_bounds_its_agent_calls(anyio_backend: str, tmp_path: Path) -> None:
    # the host's own default is 120 s: only the submit's --agent-timeout can time OPEN out
    async with running_daemon(tmp_path / "h", SlowPlanner()):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            opens = {}
            for timeout in ("0.2", "30"):
                run = (await c.result("submit", submit_params(*CHECKS, "--agent-timeout", timeout)))["run"]
                assert (await c.result("wait", {"run": run, "timeout": 60}))["state"] == "done"
                capture = (await c.result("export", {"run": run}))["capture"]
                opens[timeout] = json.loads(capture.splitlines()[1])
    assert opens["0.2"]["ordinal"] == "OPEN" and "agent failed" in json.dumps(opens["0.2"])
    assert "timed out" in json.dumps(opens["0.2"]) or "timeout" in json.dumps(opens["0.2"]).lower()
    assert "agent failed" not in json.dumps(opens["30"])


async def test_a_run_whose_output_cannot_be_written_fails_with_the_reason(anyio_backend: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            run = (await c.result("submit", submit_params(*CHECKS, "--pace", "20000",
                                                          "--ledger", str(out / "x.ledger"))))["run"]
            out.rmdir()
            out.write_text("now a file: the ledger's folder is gone")
            ended = await c.result("wait", {"run": run, "timeout": 60})
            assert ended["state"] == "failed", ended
            assert f"cannot write --ledger {out / 'x.ledger'}" in ended["reason"]
            assert (await c.result("show", {"run": run}))["reason"] == ended["reason"]
            exported = await c.result("export", {"run": run})  # the ledger is kept in the store
            assert exported["ledger"].count('"event":"fill"') == ended["fills"] > 0


async def test_ctl_follow_exits_1_in_one_line_when_the_daemon_stops(
        anyio_backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kestrel.cli import main

    home = str(tmp_path / "h")
    async with running_daemon(tmp_path / "h") as (_daemon, stop):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            run = (await c.result("submit", submit_params(*CHECKS, "--pace", "50")))["run"]
        codes: list[int] = []

        async def follow() -> None:
            codes.append(await anyio.to_thread.run_sync(main, ["ctl", "--home", home, "follow", run]))

        seen = capsys.readouterr()
        out, errs = "", [seen.err]
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.move_on_after(30):  # until follow is connected and streaming the run
                while not out:
                    await anyio.sleep(0.05)
                    seen = capsys.readouterr()
                    out += seen.out
                    errs.append(seen.err)
            assert out.startswith("turn  "), out
            stop.set()
    assert codes == [1]
    err = ("".join(errs) + capsys.readouterr().err).strip().splitlines()
    assert err == ["kestrel ctl follow: the daemon stopped (it closed the connection before answering)"]


async def test_ctl_submit_refuses_what_simulate_refuses_with_one_prefix(
        anyio_backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kestrel.cli import main

    home = str(tmp_path / "h")
    async with running_daemon(tmp_path / "h"):
        for flags, says in [(["--ledger", "/proc/x"], "--ledger /proc/x: cannot create a file in '/proc'"),
                            (["--backend", "direct", "--pace", "5"], "--pace needs the actor feed"),
                            (["--report", "r.html"], "--report is not written by the daemon")]:
            code = await anyio.to_thread.run_sync(main, ["ctl", "--home", home, "submit", *flags])
            err = capsys.readouterr().err.strip().splitlines()
            assert code == 2 and len(err) == 1 and err[0].startswith(f"kestrel ctl submit: {says}"), (flags, err)
            assert err[0].count("kestrel ctl submit") == 1
