"""`--arm-latency`: off by default (the ledger is the one without it, byte for byte); SECONDS
or the measured authoring time makes each turn take effect that long after its ordinal, the
window running on under the incumbent; the same ledger on direct, asyncio and trio."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from model_cli import evidence, run
from model_server import Canned, serve

ROOT = Path(__file__).resolve().parents[1]
ORB = f"fixed:{ROOT / 'examples' / 'orb_breakout.kes'}"
PLAN = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5% TARGET -1%"
NY = ZoneInfo("America/New_York")


def _ledger(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> bytes:
    code, _, err = run(capsys, "simulate", "--checkpoints", "11:00,13:30", "--ledger", str(path), *flags)
    assert code == 0, err
    return path.read_bytes()


def _armed(raw: bytes) -> list[dict[str, object]]:
    return [e for e in map(json.loads, raw.splitlines()) if e["event"] == "armed"]


def _ns(date: str, hhmm: str) -> int:
    h, m = map(int, hhmm.split(":"))
    d = dt.date.fromisoformat(date)
    return int(dt.datetime(d.year, d.month, d.day, h, m, tzinfo=NY).timestamp()) * 10**9


def test_off_zero_and_a_silent_agent_measured_keep_the_ledger(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    off = _ledger(capsys, tmp_path / "off.jsonl", "--agent", ORB)
    assert _ledger(capsys, tmp_path / "zero.jsonl", "--agent", ORB, "--arm-latency", "0") == off
    # a plan file calls no model: its measured authoring time is 0
    assert _ledger(capsys, tmp_path / "m.jsonl", "--agent", ORB, "--arm-latency", "measured") == off
    assert _ledger(capsys, tmp_path / "b.jsonl", "--agent", "baseline", "--arm-latency", "0") == \
        _ledger(capsys, tmp_path / "b0.jsonl", "--agent", "baseline")


@pytest.mark.parametrize("backend", ["direct", "asyncio", "trio"])
def test_a_fixed_latency_arms_each_turn_that_long_after_its_ordinal(
        backend: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    off = _ledger(capsys, tmp_path / "off.jsonl", "--agent", ORB, "--backend", backend)
    late = _ledger(capsys, tmp_path / "late.jsonl", "--agent", ORB, "--backend", backend, "--arm-latency", "90")
    assert late != off
    (first,) = _armed(off)[:1]
    (delayed,) = _armed(late)[:1]
    assert delayed["ts"] == int(str(first["ts"])) + 90 * 10**9  # the OPEN turn, 90 s later
    # nothing of the plan happens before it takes effect
    events = [json.loads(x) for x in late.splitlines()]
    assert all(int(e["ts"]) >= int(str(delayed["ts"])) for e in events if e.get("plan") == "orb")
    if backend != "direct":
        assert late == _ledger(capsys, tmp_path / "d.jsonl", "--agent", ORB, "--backend", "direct",
                               "--arm-latency", "90")


def test_measured_latency_is_the_ordinals_model_call_time(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    ev, ledger = tmp_path / "ev.jsonl", tmp_path / "l.jsonl"
    with serve(lambda path, body: Canned(PLAN, delay=0.4)) as srv:
        code, out, err = run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", srv.openai_url,
                             "--backend", "direct", "--arm-latency", "measured", "--evidence", str(ev),
                             "--ledger", str(ledger), "--json")
    assert code == 0, err
    date = json.loads(out)["days"][0]["date"]
    calls = [r for r in evidence(ev) if r.get("latency_ms") is not None and r["ordinal"] == "OPEN"]
    spent_ns = int(round(sum(r["latency_ms"] for r in calls) * 1e6))
    assert spent_ns >= 400_000_000  # the provider's delay
    (armed,) = _armed(ledger.read_bytes())
    assert armed["ts"] == _ns(date, "09:30") + spent_ns


@pytest.mark.parametrize("bad", ["soon", "-1", "nan"])
def test_a_bad_latency_is_one_line(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", "--arm-latency", bad)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--arm-latency" in err
