"""The daemon's model calls are bounded across its runs: `--max-concurrency` (and an agent's
`|concurrency=`) is one set of call slots per endpoint shared by every run, so N runs against one
provider never have more calls in flight than the bound. Counted by the loopback provider (the
requests it is answering at once), on asyncio and trio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon_support import Conn, running_daemon, submit_params
from model_server import Canned, serve
from kestrel.cli import main
from kestrel.cli.daemon import DaemonCalls, SimulatePlanner

pytestmark = pytest.mark.anyio
RUNS = 4
LATENCY_S = 0.3


def _pass(_path: str, _body: dict[str, Any]) -> Canned:
    return Canned(text="PASS")


async def _most_in_flight(tmp: Path, calls: DaemonCalls | None, agent_options: str = "") -> tuple[int, int, list[str]]:
    """(the most requests in flight at once, requests answered, the runs' end states) for RUNS
    runs submitted at once against one loopback provider."""
    with serve(_pass, latency=LATENCY_S) as srv:
        agent = f"openai:gpt-4o@{srv.openai_url}|key=none{agent_options}"
        async with running_daemon(tmp / "h", SimulatePlanner(calls=calls)):
            async with Conn.open(tmp / "h" / "kestrel.sock") as c:
                runs = [(await c.result("submit", submit_params("--agent", agent, "--checkpoints", "11:00,13:30")))["run"]
                        for _ in range(RUNS)]
                states = [(await c.result("wait", {"run": r, "timeout": 120}))["state"] for r in runs]
        return srv.most_in_flight, srv.answered(), states


async def test_the_daemons_bound_is_shared_by_all_its_runs(anyio_backend: str, tmp_path: Path) -> None:
    most, answered, states = await _most_in_flight(tmp_path, DaemonCalls(per_provider={"openai": 2}))
    assert states == ["done"] * RUNS and answered == RUNS * 3
    assert most == 2  # bounded, and the runs did overlap up to the bound


async def test_an_agents_concurrency_is_shared_by_all_its_runs(anyio_backend: str, tmp_path: Path) -> None:
    most, answered, states = await _most_in_flight(tmp_path, None, "|concurrency=1")
    assert states == ["done"] * RUNS and answered == RUNS * 3
    assert most == 1


async def test_without_a_bound_the_runs_overlap_past_it(anyio_backend: str, tmp_path: Path) -> None:
    """The control: the same runs unbounded do have more than 2 calls in flight at once."""
    most, _, states = await _most_in_flight(tmp_path, None)
    assert states == ["done"] * RUNS and most > 2


async def test_a_run_naming_another_bound_is_refused(anyio_backend: str, tmp_path: Path) -> None:
    with serve(_pass) as srv:
        async with running_daemon(tmp_path / "h", SimulatePlanner(calls=DaemonCalls(default=2))):
            async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
                agent = f"openai:gpt-4o@{srv.openai_url}|key=none|concurrency=3"
                reply = await c.call("submit", submit_params("--agent", agent, "--checkpoints", "11:00"))
                text = reply["error"]["message"] if "error" in reply else ""
                if not text:  # refused when its run is resolved: the run fails with the reason
                    run = reply["result"]["run"]
                    with anyio.fail_after(60):
                        done = await c.result("wait", {"run": run, "timeout": 60})
                    assert done["state"] == "failed"
                    text = str(done.get("reason") or done)
                assert "at 2 in flight" in text and "concurrency=3" in text
        assert srv.count() == 0


def test_a_bad_max_concurrency_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "nobody=2", "openai=x"):
        assert main(["daemon", "--home", str(tmp_path / "h"), "--max-concurrency", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--max-concurrency" in err, err
