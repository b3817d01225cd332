"""Blind mode is recorded where a run is kept: the capture header says `"blind":true`, `kestrel
replay` of a blind run runs blind again and reproduces its ledger and capture byte for byte (on
every backend), and every surface that starts a run takes it (`simulate --blind`, the MCP
`simulate` tool through the official client, the daemon's `ctl submit --blind`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon_support import Conn, running_daemon, submit_params
from kestrel.cli import main

pytestmark = pytest.mark.anyio

# prices in the blind scale (the first price reads 100): a buy limit at 110 is marketable in the blind
# scale (the sample reads near 104 there); read as real prices it never fills (the
# sample trades near 190)
BLIND_PLAN = "PLAN lim UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > 0: BUY 10 LMT 110.00 STOP @106.00\n"
CHECKS = ("--checkpoints", "11:00,13:30", "--days", "2")


def _simulate(tmp: Path, name: str, *flags: str) -> tuple[bytes, bytes, dict[str, Any]]:
    ledger, capture = tmp / f"{name}.ledger", tmp / f"{name}.capture"
    plan = tmp / "lim.kes"
    plan.write_text(BLIND_PLAN)
    assert main(["simulate", "--agent", f"fixed:{plan}", *CHECKS, "--ledger", str(ledger), "--capture", str(capture),
                 "--backend", "direct", *flags]) == 0
    header = json.loads(capture.read_bytes().splitlines()[0])
    return ledger.read_bytes(), capture.read_bytes(), header


def _fills(ledger: bytes) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, ledger.splitlines()) if e.get("event") == "fill"]


@pytest.mark.parametrize("backend", ["direct", "asyncio", "trio"])
def test_a_blind_capture_says_so_and_its_replay_is_byte_for_byte(backend: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ledger, capture, header = _simulate(tmp_path, "blind", "--blind")
    assert header["blind"] is True
    fills = _fills(ledger)
    assert fills and all(150 < f["price"] < 250 for f in fills)  # the engine filled real prices
    _, plain_capture, plain_header = _simulate(tmp_path, "plain")
    assert "blind" not in plain_header  # an unblinded capture is as it always was
    out_ledger, out_capture = tmp_path / "r.ledger", tmp_path / "r.capture"
    capsys.readouterr()
    code = main(["replay", str(tmp_path / "blind.capture"), "--ledger", str(out_ledger), "--capture", str(out_capture),
                 "--backend", backend])
    assert code == 0, capsys.readouterr().err
    assert "ledger identical" in capsys.readouterr().err
    assert out_ledger.read_bytes() == ledger
    assert out_capture.read_bytes() == capture  # the replay's capture is still blind
    # a blind simulate of the recorded agent plays the recorded plans (shown blind, mapped back)
    again_ledger, again_capture = tmp_path / "a.ledger", tmp_path / "a.capture"
    assert main(["simulate", "--agent", f"recorded:{tmp_path / 'blind.capture'}", *CHECKS, "--blind",
                 "--ledger", str(again_ledger), "--capture", str(again_capture), "--backend", backend]) == 0
    assert again_ledger.read_bytes() == ledger and again_capture.read_bytes() == capture


def test_the_same_plan_read_as_real_prices_never_fills(tmp_path: Path) -> None:
    """The blind run's fills come from the blind reading (not a plan that fills either way)."""
    ledger, _, _ = _simulate(tmp_path, "plain")
    assert _fills(ledger) == []


async def test_the_mcp_simulate_tool_takes_blind(anyio_backend: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from kestrel.service.host import open_host
    from kestrel.service.host.roots import DataRoots
    from kestrel.service.mcp import build_server

    plan = tmp_path / "lim.kes"
    plan.write_text(BLIND_PLAN)

    def cli(*flags: str) -> Any:
        capsys.readouterr()
        assert main(["simulate", "--agent", f"fixed:{plan}", "--checkpoints", "11:00,13:30", "--days", "2",
                     "--json", "--backend", "direct", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    blind, plain = cli("--blind"), cli()
    assert blind["total"]["fills"] > 0 == plain["total"]["fills"]
    async with open_host() as h:
        async with Client(build_server(h, roots=DataRoots.of([])), mode="legacy") as c:
            for flag, expected in ((True, blind), (False, plain)):
                result = await c.call_tool("simulate", {"plan": BLIND_PLAN, "checkpoints": "11:00,13:30", "days": 2,
                                                         "blind": flag})
                assert not result.is_error, result.content
                assert result.structured_content == expected


async def test_a_daemon_run_submitted_blind_is_recorded_blind(anyio_backend: str, tmp_path: Path) -> None:
    ledger, capture, header = _simulate(tmp_path, "blind", "--blind")
    assert header["blind"] is True
    async with running_daemon(tmp_path / "h"):
        async with Conn.open(tmp_path / "h" / "kestrel.sock") as c:
            argv = ["--agent", f"fixed:{tmp_path / 'lim.kes'}", *CHECKS, "--blind"]
            run = (await c.result("submit", submit_params(*argv)))["run"]
            done = await c.result("wait", {"run": run, "timeout": 60})
            assert done["state"] == "done"
            out = await c.result("export", {"run": run})
            assert (out["ledger"].encode(), out["capture"].encode()) == (ledger, capture)
