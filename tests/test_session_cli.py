"""`kestrel simulate` and `kestrel replay` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main
from cli_helpers import run_cli


_run = run_cli


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
    # single-shot built-in agents leave no evidence on a good run: the sink file is created empty
    ev = tmp_path / "ev.jsonl"
    code, out, err = _run(capsys, "simulate", "--json", "--evidence", str(ev))
    assert code == 0, err
    assert ev.read_text() == "" and json.loads(out)["evidence"] == {}


def test_evidence_logger_writes_each_record_as_a_json_line(tmp_path: Path) -> None:
    from kestrel.agents.scripted import ScriptedAgent
    from kestrel.data.sample import load_sample
    from kestrel.logs import open_json_sink
    from kestrel.session.protocol import Usage
    from kestrel.session.runner import SessionOptions, evidence_logger, run_session

    ev = tmp_path / "ev.jsonl"
    agent = ScriptedAgent(["VIEW scout: quote", "PLAN x\nWHEN last > 30m: BUY 1 MKT", "PASS"],
                          usage=Usage(input=7, output=3))
    with open_json_sink(ev, append=False) as log:
        run_session(load_sample(), agent, SessionOptions(profile="balanced"), sink=evidence_logger(log))
    lines = [json.loads(x) for x in ev.read_text().splitlines()]
    assert [(x["event"], x["ordinal"], x["iteration"], x["kind"], x["profile"]) for x in lines] == [
        ("authoring_iteration", "OPEN", 0, "view-request", "balanced"),
        ("authoring_iteration", "OPEN", 1, "repair", "balanced"),
    ]
    assert lines[0]["panes"] == ["quote"] and lines[0]["usage"]["input"] == 7
    assert lines[1]["error"].startswith("1 error in Kestrel document:\nline 2, column 11: cannot compare")


def _files(tmp_path: Path) -> dict[str, str]:
    bad = tmp_path / "bad.kes"
    bad.write_text("PLAN x\nWHEN last > 30m: BUY 1 MKT\n")
    other = tmp_path / "msft.kes"
    other.write_text("PLAN y ON MSFT\nWHEN last > 1: BUY 1 MKT\n")
    view = tmp_path / "view.kes"
    view.write_text("VIEW scout: quote\n")
    return {"bad": str(bad), "msft": str(other), "view": str(view), "dir": str(tmp_path)}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--agent", "fixed:{bad}"), "{bad}:2:11: cannot compare Price with Duration (>) (hint: "),
        (("--agent", "fixed:{view}"), "{view}: holds a VIEW statement; a fixed plan file holds one PLAN"),
        (("--agent", "fixed:{msft}"), "the engine refuses plan 'y': plan 'y' trades MSFT"),
        (("--capture", "{dir}"), "--capture {dir}: is a directory"),
        (("--ledger", "{dir}/no/l.jsonl"), "no such directory"),
        (("--evidence", "{dir}/no/e.jsonl"), "no such directory"),
        (("--guard", "90000"), "--guard must be 0 to 86399 seconds"),
    ],
)
def test_bad_files_and_paths_fail_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    f = _files(tmp_path)
    code, out, err = _run(capsys, "simulate", *(a.format(**f) for a in argv))
    assert code == 2 and out == "" and message.format(**f) in err and "Traceback" not in err


def test_a_capture_for_another_schedule_or_malformed_fails_up_front(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cap = tmp_path / "c.jsonl"
    assert _run(capsys, "simulate", "--json", "--checkpoints", "11:00", "--capture", str(cap))[0] == 0
    code, out, err = _run(capsys, "simulate", "--agent", f"recorded:{cap}")
    assert code == 2 and out == ""
    assert "holds turns for SAMPLE on 2024-04-15 at OPEN 11:00, but this run is SAMPLE on " \
        "2024-04-15 at OPEN: use `kestrel replay" in err
    assert _run(capsys, "simulate", "--json", "--agent", f"recorded:{cap}", "--checkpoints", "11:00")[0] == 0
    header, open_turn, late = cap.read_text().splitlines()
    shifted = tmp_path / "shifted.jsonl"
    shifted.write_text("\n".join([header, open_turn, late.replace('"11:00"', '"12:00"')]) + "\n")
    missing = tmp_path / "missing.jsonl"
    missing.write_text("\n".join([header, open_turn]) + "\n")
    wrong_side = tmp_path / "side.jsonl"
    wrong_side.write_text("\n".join([header, open_turn.replace('"stop":{"mode":"abs","value":-', '"stop":{"mode":"abs","value":', 1), late]) + "\n")
    future = tmp_path / "future.jsonl"
    future.write_text("\n".join([header.replace('"guard_s":300', '"guard_s":-600'), open_turn, late]) + "\n")
    for path, message in (
        (future, "future.jsonl:1: guard_s must be 0 to 86399 seconds, got -600"),
        (shifted, "turn 2 is for 2024-04-15 12:00, expected 2024-04-15 11:00"),
        (missing, "the capture ends before 2024-04-15 11:00: 1 turns missing"),
        (wrong_side, "turn 1 (2024-04-15 OPEN): plan 'orb' is not valid Kestrel"),
    ):
        for argv in (("simulate", "--agent", f"recorded:{path}"), ("replay", str(path))):
            code, out, err = _run(capsys, *argv)
            assert code == 2 and out == "" and message in err, (argv, err)


def test_json_summary_says_which_engine_path_ran(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    docs, ledgers = [], []
    for path in ("auto", "reference"):
        led = tmp_path / f"{path}.jsonl"
        code, out, err = _run(capsys, "simulate", "--json", "--engine-path", path, "--ledger", str(led))
        assert code == 0, err
        docs.append(json.loads(out))
        ledgers.append(led.read_bytes())
    auto, ref = docs
    assert auto["engine_path"] == "auto" and ref["engine_path"] == "reference"
    # the sample session has 6.5 h of 1-second ticks; the baseline's plan is armed all day
    assert auto["engine_ticks"] == {"fast": 23400, "reference": 0}
    assert ref["engine_ticks"] == {"fast": 0, "reference": 23400}
    assert auto["days"][0]["engine_ticks"] == auto["engine_ticks"]
    assert ledgers[0] == ledgers[1]
    assert {k: v for k, v in auto.items() if not k.startswith("engine")} == {
        k: v for k, v in ref.items() if not k.startswith("engine")
    } | {"days": auto["days"]}


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
        (("--preset", "oanda"), "--preset applies to --data PATH only"),
        (("--crossed", "drop"), "--crossed applies to --data PATH only"),
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
    assert json.loads(out)["data"] == "sample (seed 7)"


def test_report_pairs_each_fill_with_its_own_position_on_a_shared_tick(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kestrel.report.summary import report
    from kestrel.engine.ledger import Filled, Ledger, PositionChanged
    from kestrel.session.capture import CaptureHeader
    from kestrel.session.runner import DayResult, SessionResult

    ts = 1_713_187_800 * 10**9  # 2024-04-15 13:30:00 UTC = 09:30:00 New York
    ledger = Ledger([
        Filled(7, ts, 2, "buy", 100, 10.0, 0.0),
        PositionChanged(7, ts, 0, None, -50.0),  # the stop closes the short
        Filled(7, ts, 3, "buy", 100, 10.01, 0.0),
        PositionChanged(7, ts, 100, 10.01, -50.0),  # a new long on the same tick
    ])
    header = CaptureHeader("sample", "SAMPLE", ("2024-04-15",), ("OPEN",), 300, "baseline")
    day = DayResult("2024-04-15", ledger, [], [], [], "America/New_York", 2)
    from kestrel.data import load_sample

    report(SessionResult(header, [day]), load_sample())
    rows = [line for line in capsys.readouterr().out.splitlines() if "09:30:00" in line and "│ buy" in line]
    assert [[c.strip() for c in r.split("│")[3:8]] for r in rows] == [
        ["buy", "100", "10.00", "0", "-50.00"],
        ["buy", "100", "10.01", "100", "-50.00"],
    ]


def test_loop_flags_with_a_single_shot_agent_get_a_note_on_stderr_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--json"]) == 0
    plain = capsys.readouterr()
    assert "note:" not in plain.err
    assert main(["simulate", "--json", "--profile", "fast", "--effort", "high"]) == 0
    flagged = capsys.readouterr()
    assert flagged.out == plain.out  # the run itself is unchanged
    assert "agent 'baseline' is single-shot" in flagged.err
    assert "--profile, --effort have no effect" in flagged.err
