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


@pytest.mark.parametrize("backend", ["direct", "trio"])
def test_a_sweep_arms_late_and_replay_arms_at_the_same_moments(
        backend: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`sweep --arm-latency measured`: the setting is in the run's key and its capture (the
    header and each turn's delay); `replay` of that capture, which calls no model, arms every
    turn at the recorded moment: the same ledger byte for byte."""
    calls = iter(range(1_000))

    def renamed(path: str, body: object) -> Canned:  # a new name each call: each turn re-arms
        return Canned(PLAN.replace("PLAN ", f"PLAN turn{next(calls)}_", 1), delay=0.3)

    with serve(renamed) as srv:
        agent = f"openai:gpt-4o@{srv.openai_url}|key=none"
        flags = ["sweep", "--agents", agent, "--days", "1", "--checkpoints", "11:00", "--backend", backend,
                 "--json"]
        code, out, err = run(capsys, *flags, "--out", str(tmp_path / "late"), "--arm-latency", "measured")
        assert code == 0, err
        code, plain, err = run(capsys, *flags, "--out", str(tmp_path / "plain"))
        assert code == 0, err
    (late,), (unflagged,) = json.loads(out)["runs"], json.loads(plain)["runs"]
    assert late["key"] != unflagged["key"]  # the setting decides the run: it is in the key
    run_dir = tmp_path / "late" / "runs" / late["key"]
    lines = [json.loads(x) for x in (run_dir / "capture.jsonl").read_text().splitlines()]
    assert lines[0]["arm_latency"] == "measured"
    delays = [t["arm_delay_ns"] for t in lines[1:]]
    assert len(delays) == 2 and all(d >= 300_000_000 for d in delays)  # the provider's delay, at least
    armed = _armed((run_dir / "ledger.jsonl").read_bytes())
    date = lines[0]["dates"][0]
    assert [a["ts"] for a in armed] == [_ns(date, "09:30") + delays[0], _ns(date, "11:00") + delays[1]]
    plain_dir = tmp_path / "plain" / "runs" / unflagged["key"]
    assert "arm_latency" not in json.loads((plain_dir / "capture.jsonl").read_text().splitlines()[0])
    assert (plain_dir / "ledger.jsonl").read_bytes() != (run_dir / "ledger.jsonl").read_bytes()
    replayed, recap = tmp_path / "replayed.jsonl", tmp_path / "recap.jsonl"
    code, _, err = run(capsys, "replay", str(run_dir / "capture.jsonl"), "--ledger", str(replayed),
                       "--capture", str(recap), "--backend", backend)
    assert code == 0, err
    assert replayed.read_bytes() == (run_dir / "ledger.jsonl").read_bytes()
    assert [json.loads(x).get("arm_delay_ns") for x in recap.read_text().splitlines()[1:]] == delays
