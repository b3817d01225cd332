"""`kestrel simulate` and `kestrel replay` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_simulate_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "simulate", "--checkpoints", "11:00")
    assert code == 0, err
    for part in ("Turns per ordinal", "Armed plan (2024-04-15 OPEN):", "PLAN orb", "Fills", "PnL",
                 "Evidence records:"):
        assert part in out


def test_simulate_json_capture_and_replay(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cap, led = tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    code, out, err = _run(capsys, "simulate", "--json", "--checkpoints", "11:00",
                          "--capture", str(cap), "--ledger", str(led))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schedule"] == ["OPEN", "11:00"] and doc["agent"] == "baseline"
    assert [t["turn"] for t in doc["days"][0]["turns"]] == ["PLAN orb", "PASS"]
    led2 = tmp_path / "l2.jsonl"
    code, out2, err = _run(capsys, "replay", str(cap), "--backend", "trio", "--json",
                           "--ledger", str(led2), "--expect-ledger", str(led))
    assert code == 0, err
    assert "ledger identical" in err
    assert led2.read_bytes() == led.read_bytes() and out2 == out


def test_balanced_profile_prints_and_writes_the_same_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    outs = []
    for extra in ((), ("--profile", " Balanced ")):
        cap, led = tmp_path / f"c{len(extra)}", tmp_path / f"l{len(extra)}"
        code, out, _ = _run(capsys, "simulate", "--json", "--capture", str(cap), "--ledger", str(led), *extra)
        assert code == 0
        outs.append((out, cap.read_bytes(), led.read_bytes()))
    assert outs[0] == outs[1]


def test_evidence_sink_writes_json_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "bad.kes"
    plan.write_text("PLAN x\nWHEN last > 30m: BUY 1 MKT\n")
    ev = tmp_path / "ev.jsonl"
    code, out, err = _run(capsys, "simulate", "--json", "--agent", f"fixed:{plan}", "--evidence", str(ev))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["days"][0]["turns"][0]["turn"] == "STANDDOWN"
    lines = [json.loads(x) for x in ev.read_text().splitlines()]
    assert [(x["event"], x["kind"], x["ordinal"]) for x in lines] == [
        ("authoring_iteration", "single-shot-refusal", "OPEN")
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--agent", "gpt"), "unknown --agent 'gpt'"),
        (("--agent", "fixed:/no/such.kes"), "cannot read plan file"),
        (("--agent", "recorded:/no/such.jsonl"), "cannot read capture"),
        (("--profile", "turbo"), "unknown profile 'turbo'"),
        (("--mode", "nope"), "unknown mode 'nope'"),
        (("--date", "15/04/2024"), "--date must be YYYY-MM-DD"),
        (("--date", "2024-05-01"), "no session on 2024-05-01"),
        (("--checkpoints", "8:00"), "outside the session"),
        (("--max-iterations", "0"), "--max-iterations must be >= 1"),
        (("--data", "/no/such.csv"), "no such file"),
        (("--seed", "3", "--data", "/x.csv"), "--seed applies to --data sample only"),
        (("--symbol", "AAPL"), "does not match the sample's symbol"),
        (("--days", "9"), "holds only 6 sessions"),
    ],
)
def test_simulate_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str) -> None:
    code, _, err = _run(capsys, "simulate", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_replay_of_a_bad_capture_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    code, _, err = _run(capsys, "replay", str(bad))
    assert code == 2 and "bad.jsonl:1: not a capture record" in err


def test_seeded_sample_and_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "simulate", "--json", "--seed", "7", "--mode", "scout")
    assert code == 0, err
    assert json.loads(out)["data"] == "sample|seed=7"
