"""Captures that know their data, replay that verifies it, safe outputs, exit codes
and messages at the CLI's edges."""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kestrel.cli import main
from kestrel.data import SyntheticSpec, generate
from cli_helpers import quotes_csv, run_cli

ROOT = Path(__file__).resolve().parent.parent


_run = run_cli


@pytest.fixture(scope="module")
def quotes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two FX sessions of generated quotes as an ISO-timestamp CSV (the `oanda` layout)."""
    return quotes_csv(tmp_path_factory.mktemp("data") / "quotes.csv", sessions=2, seed=3)


def _header(capture: Path) -> dict[str, object]:
    head: dict[str, object] = json.loads(capture.read_bytes().splitlines()[0])
    return head


def _capture(capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    cap, led = tmp_path / "run.capture.jsonl", tmp_path / "run.ledger.jsonl"
    code, _, err = _run(capsys, "simulate", "--data", str(quotes), "--preset", "oanda", "--capture", str(cap),
                        "--ledger", str(led), "--json", *extra)
    assert code == 0, err
    return cap, led


def test_the_capture_header_records_the_data_and_the_ledger_checksum(
    capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path
) -> None:
    cap, led = _capture(capsys, quotes, tmp_path, "--multiplier", "100000", "--spikes", "drop")
    h = _header(cap)
    assert h["format"] == "kestrel-capture/2"
    assert h["ledger_sha256"] == hashlib.sha256(led.read_bytes()).hexdigest()
    assert h["source"] == {
        "kind": "file", "symbol": "EURUSD", "tick_size": 0.01, "multiplier": 100000.0, "currency": "USD",
        "path": str(quotes.resolve()), "sha256": hashlib.sha256(quotes.read_bytes()).hexdigest(), "seed": None,
        "preset": "oanda", "crossed": "error", "spikes": "drop", "spike_factor": 2.0, "delimiter": ",", "columns": None, "news": None,
    }
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left


def test_sample_captures_record_the_seed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cap = tmp_path / "c.jsonl"
    assert _run(capsys, "simulate", "--seed", "7", "--capture", str(cap), "--json")[0] == 0
    src = _header(cap)["source"]
    assert isinstance(src, dict) and (src["kind"], src["seed"], src["path"], src["sha256"]) == ("sample", 7, None, None)
    code, _, err = _run(capsys, "replay", str(cap), "--json")
    assert code == 0 and "ledger identical to the captured run's" in err
    code, out, _ = _run(capsys, "replay", str(cap))
    assert code == 0 and out.startswith("kestrel replay  SAMPLE  data sample (seed 7)")  # not a simulate banner


def test_replay_from_another_folder_and_from_a_moved_copy(
    capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "here.csv"
    copy.write_bytes(quotes.read_bytes())
    monkeypatch.chdir(tmp_path)
    cap, led = tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    assert _run(capsys, "simulate", "--data", "here.csv", "--preset", "oanda", "--capture", "c.jsonl",
                "--ledger", "l.jsonl", "--json")[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative --data path is recorded absolute
    code, _, err = _run(capsys, "replay", str(cap), "--ledger", "again.jsonl", "--json")
    assert code == 0, err
    assert (elsewhere / "again.jsonl").read_bytes() == led.read_bytes()
    moved = elsewhere / "moved.csv"
    copy.rename(moved)
    code, _, err = _run(capsys, "replay", str(cap), "--json")
    assert code == 2 and err == (f"kestrel replay: {copy}: the captured data file is not there; "
                                 "pass --data PATH to point at a copy of it\n")
    code, _, err = _run(capsys, "replay", str(cap), "--data", "moved.csv", "--json")
    assert code == 0 and "ledger identical" in err


def test_replay_refuses_edited_or_swapped_data(capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path) -> None:
    cap, _ = _capture(capsys, quotes, tmp_path)
    edited = tmp_path / "edited.csv"
    lines = quotes.read_text().splitlines(keepends=True)
    lines[5] = lines[5][:-2] + "9\n"  # one ask changed
    edited.write_text("".join(lines))
    code, _, err = _run(capsys, "replay", str(cap), "--data", str(edited), "--json")
    assert code == 2
    assert err.startswith(f"kestrel replay: {edited}: its checksum changed since the capture (sha256 ")
    assert err.rstrip().endswith("this is not the data the capture was made on")
    # a header claiming another instrument than the data gives is refused too
    raw = cap.read_bytes().splitlines()
    head = json.loads(raw[0])
    head["symbol"] = "USDJPY"
    bad = tmp_path / "swapped.jsonl"
    bad.write_bytes(b"\n".join([json.dumps(head).encode(), *raw[1:]]) + b"\n")
    code, _, err = _run(capsys, "replay", str(bad), "--json")
    assert code == 2 and "the data is EURUSD, the capture was made on USDJPY" in err


def test_a_ledger_mismatch_names_the_first_differing_line(
    capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path
) -> None:
    cap, led = _capture(capsys, quotes, tmp_path)
    raw = cap.read_bytes().splitlines()
    head = json.loads(raw[0])
    head["ledger_sha256"] = "0" * 64
    tampered = tmp_path / "t.jsonl"
    tampered.write_bytes(b"\n".join([json.dumps(head).encode(), *raw[1:]]) + b"\n")
    code, _, err = _run(capsys, "replay", str(tampered), "--json")
    assert code == 1 and "the replayed ledger differs from the captured run's" in err
    lines = led.read_bytes().splitlines()
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"\n".join([b'{"changed":true}', *lines[1:]]) + b"\n")
    code, _, err = _run(capsys, "replay", str(cap), "--expect-ledger", str(other), "--json")
    assert code == 1
    assert err.strip() == (f"kestrel replay: the replayed ledger differs from --expect-ledger {other}: line 1: "
                           f'expected {{"changed":true}} / replayed {lines[0].decode()}')


def test_old_format_captures_are_refused_with_a_recapture_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text('{"record":"header","data":"sample","symbol":"SAMPLE","dates":["2024-04-15"],'
                   '"schedule":["OPEN"],"guard_s":300,"agent":"baseline","format":"kestrel-capture/1"}\n')
    code, _, err = _run(capsys, "replay", str(old))
    assert code == 2 and err == (
        "kestrel replay: old.jsonl:1: capture format 'kestrel-capture/1' records no data checksum, so a replay "
        "cannot check its data; re-capture it with this version (kestrel simulate ... --capture)\n")


def test_output_collisions_and_bad_folders_are_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path
) -> None:
    keep = tmp_path / "keep.jsonl"
    keep.write_text("precious\n")
    cases = [
        (("simulate", "--capture", str(keep), "--ledger", str(keep)),
         f"--ledger {keep} is the same file as --capture: give each output its own path"),
        (("simulate", "--evidence", str(keep), "--ledger", str(tmp_path / "." / "keep.jsonl")),
         f"--evidence {keep} is the same file as --ledger"),
        (("simulate", "--data", str(quotes), "--ledger", str(quotes)),
         f"--ledger {quotes} is the same file as the input --data"),
        (("simulate", "--ledger", str(tmp_path / "no" / "l.jsonl")),
         f"--ledger {tmp_path / 'no' / 'l.jsonl'}: no such directory {str(tmp_path / 'no')!r}"),
        (("replay", str(keep), "--ledger", str(keep)), f"--ledger {keep} is the same file as the input capture"),
        (("replay", str(keep), "--capture", str(keep)), f"--capture {keep} is the same file as the input capture"),
    ]
    for argv, message in cases:
        code, out, err = _run(capsys, *argv)
        assert code == 2 and message in err and out == "", (argv, err)
        assert keep.read_text() == "precious\n"


def test_a_stale_ledger_goes_when_a_run_starts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    led = tmp_path / "l.jsonl"
    led.write_text("an older run's ledger\n")
    assert _run(capsys, "simulate", "--ledger", str(led), "--json")[0] == 0
    assert led.read_text() != "an older run's ledger\n" and json.loads(led.read_text().splitlines()[0])


def _nested_capture(capsys: pytest.CaptureFixture[str], tmp_path: Path, depth: int) -> Path:
    cap = tmp_path / "c.jsonl"
    assert _run(capsys, "simulate", "--capture", str(cap), "--json")[0] == 0
    head, turn = cap.read_text().splitlines()[:2]
    rec = json.loads(turn)
    cond = json.dumps(rec["turn"]["plan"]["rules"][0]["cond"], separators=(",", ":"))
    deep = '{"kind":"not","operand":' * depth + cond + "}" * depth
    out = tmp_path / f"deep{depth}.jsonl"
    out.write_text(head + "\n" + turn.replace(cond, deep) + "\n")
    return out


@pytest.mark.parametrize("depth", [30, 900, 5000])
def test_deeply_nested_captures_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, depth: int) -> None:
    deep = _nested_capture(capsys, tmp_path, depth)
    for argv in (("replay", str(deep)), ("simulate", "--agent", f"recorded:{deep}")):
        code, _, err = _run(capsys, *argv)
        assert code == 2, err
        assert err.count("\n") == 1 and ("nested too deeply" in err or "nested deeper than" in err), err


def test_fmt_write_failure_is_exit_2(tmp_path: Path) -> None:
    """A write that fails (here: the file size limit, which root cannot bypass) is a one-line
    usage error, and the file is left as it was (written to a temporary file, then renamed)."""
    doc = tmp_path / "p.kes"
    text = "PLAN a UNTIL 15:45 RISK maxpos 1  maxloss 10\nWHEN last > 1: BUY 1 MKT\n"
    doc.write_text(text)

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))

    r = subprocess.run([sys.executable, "-m", "kestrel", "fmt", "--write", str(doc)], capture_output=True,
                       text=True, preexec_fn=small_files, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr == f"{doc}: cannot write: File too large\n"
    assert doc.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.kes"]


def test_fmt_says_which_comments_block_a_rewrite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = tmp_path / "c.kes"
    doc.write_text("# kept\nPLAN a UNTIL 15:45 RISK maxpos 1  maxloss 10\n# inner\nWHEN last > 1: BUY 1 MKT  # tail\n")
    why = ("the comments on lines 3, 4 follow the leading comment block, and the canonical form is printed from "
           "the parsed plan, which holds no comments, so they would be lost; move them into the comment block "
           "at the top of the file (kept verbatim), then run kestrel fmt --write")
    for mode in ("--check", "--write"):
        code, _, err = _run(capsys, "fmt", mode, str(doc))
        assert code == 1 and err == f"{doc}: not in canonical form, and kestrel fmt --write cannot rewrite it: {why}\n"
    code, out, err = _run(capsys, "fmt", str(doc))
    assert code == 0 and out.startswith("# kept\nPLAN a") and err == f"{doc}: note: {why}\n"


def test_cli_messages(capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path) -> None:
    for argv, message in [
        (("simulate", "--seed", "-1"), "kestrel simulate: --seed must be a whole number >= 0, got -1\n"),
        (("simulate", "--data", ""), "kestrel simulate: --data is empty: give 'sample' or the path of a CSV/Parquet file\n"),
        (("view", "VIEW v: quote", "--data", " "), "kestrel view: --data is empty: give 'sample' or the path of a CSV/Parquet file\n"),
        (("view", "VIEW v: quote", "--at", "08:00"),
         "kestrel view: --at 08:00 is outside the last session (09:30-16:00 America/New_York on 2024-04-15); "
         "give a time within it\n"),
        (("simulate", "--guard", "2d"), "kestrel simulate: --guard must be seconds like 300 or a duration like 30s, 5m or 1h, got '2d'\n"),
        (("simulate", "--data", str(quotes), "--tick-size", "0.03"), "is not a multiple of the tick size 0.03"),
    ]:
        code, _, err = _run(capsys, *argv)
        assert code == 2 and message in err, (argv, err)
    code, _, err = _run(capsys, "check", "/dev/zero")
    assert code == 2 and err == "/dev/zero: larger than 1048576 bytes: not a Kestrel document\n"


def test_guard_takes_seconds_or_a_duration_in_both_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ledgers = []
    for k, guard in enumerate(("300", "5m", "300s")):
        led = tmp_path / f"l{k}.jsonl"
        assert _run(capsys, "simulate", "--guard", guard, "--checkpoints", "11:00", "--ledger", str(led), "--json")[0] == 0
        ledgers.append(led.read_bytes())
    assert ledgers[0] == ledgers[1] == ledgers[2]
    views = [_run(capsys, "view", "VIEW v: quote", "--guard", g) for g in ("300", "5m")]
    assert views[0][0] == 0 and views[0] == views[1]
    other = _run(capsys, "view", "VIEW v: quote", "--guard", "1h")
    assert other[0] == 0 and other[1] != views[0][1]


def test_simulate_prints_the_load_report_and_takes_the_instrument(
    capsys: pytest.CaptureFixture[str], quotes: Path
) -> None:
    code, out, err = _run(capsys, "simulate", "--data", str(quotes), "--preset", "oanda", "--tick-size", "0.01",
                          "--currency", "JPY", "--json")
    assert code == 0
    assert err.startswith("kestrel simulate: 11700 rows → 11700 ticks in 2 sessions\n")
    code, out, err = _run(capsys, "simulate", "--data", str(quotes), "--preset", "oanda", "--json")
    assert "(tick size 0.01 inferred)" in err


def test_one_budget_range(capsys: pytest.CaptureFixture[str]) -> None:
    from kestrel.frame.catalog import DEFAULT_CATALOG
    from kestrel.lang import DEFAULT_LIMITS

    assert (DEFAULT_LIMITS.min_budget, DEFAULT_LIMITS.max_budget) == (DEFAULT_CATALOG.min_budget, DEFAULT_CATALOG.max_budget)
    lo, hi = DEFAULT_CATALOG.min_budget, DEFAULT_CATALOG.max_budget
    for budget, code in ((lo - 1, 1), (lo, 0), (hi, 0), (hi + 1, 1)):
        assert _run(capsys, "view", f"VIEW v: quote BUDGET {budget}")[0] == code, budget
