"""Outputs that are not regular files, inputs a command would overwrite (the
capture's recorded data, report inputs), empty output paths, folders where nothing can be
created, and replay messages for bad `--data` values."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from kestrel.cli import main
from kestrel.data import SyntheticSpec, generate
from kestrel.outputs import atomic_write
from cli_helpers import quotes_csv, run_cli


_run = run_cli


@pytest.fixture(scope="module")
def quotes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quotes_csv(tmp_path_factory.mktemp("data") / "q.csv", sessions=1, seed=5)


@pytest.fixture(scope="module")
def captured(quotes: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cap")
    cap, led = d / "c.jsonl", d / "l.jsonl"
    assert main(["simulate", "--data", str(quotes), "--preset", "oanda", "--capture", str(cap),
                 "--ledger", str(led), "--json"]) == 0
    return cap, led


def _fifo(tmp_path: Path) -> Path:
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("flag", ["--capture", "--ledger", "--evidence", "--report", "--png"])
def test_a_fifo_output_is_refused_and_kept(capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str) -> None:
    fifo = _fifo(tmp_path)
    code, _, err = _run(capsys, "simulate", flag, str(fifo))
    assert code == 2
    assert str(fifo) in err and "not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_to_a_fifo_is_refused_and_a_symlink_to_a_file_is_written_through(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = _fifo(tmp_path)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    code, _, err = _run(capsys, "simulate", "--ledger", str(link))
    assert code == 2 and "not a regular file" in err
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(link).st_mode)
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link2 = tmp_path / "l.jsonl"
    link2.symlink_to(target)
    code, _, err = _run(capsys, "simulate", "--ledger", str(link2), "--json")
    assert code == 0, err
    assert link2.is_symlink()
    assert target.read_text().startswith("{") and target.read_text() != "old\n"


def test_atomic_write_refuses_a_target_that_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    with pytest.raises(OSError):
        atomic_write(fifo, b"x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    folder = tmp_path / "dir"
    folder.mkdir()
    with pytest.raises(OSError):
        atomic_write(folder, b"x")
    assert folder.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "fifo"]  # no temporary file left


@pytest.mark.parametrize("flag", ["--capture", "--ledger", "--evidence", "--report", "--png"])
def test_an_empty_output_path_is_refused_up_front(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  flag: str) -> None:
    ev = tmp_path / "e.jsonl"
    args = ["simulate", flag, ""] + (["--evidence", str(ev)] if flag != "--evidence" else [])
    code, _, err = _run(capsys, *args)
    assert code == 2
    assert f"{flag} is empty" in err
    assert not ev.exists()  # refused before the run started


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_a_folder_where_nothing_can_be_created_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # /proc/self says "writable" to root through os.access, but no file can be created in it
    ev = tmp_path / "e.jsonl"
    code, _, err = _run(capsys, "simulate", "--ledger", "/proc/self/x.jsonl", "--evidence", str(ev))
    assert code == 2
    assert "/proc/self/x.jsonl" in err and "cannot create a file" in err
    assert not ev.exists()


def test_replay_refuses_an_output_on_the_captures_recorded_data(
    capsys: pytest.CaptureFixture[str], quotes: Path, captured: tuple[Path, Path]
) -> None:
    cap, _ = captured
    before = quotes.read_bytes()
    code, _, err = _run(capsys, "replay", str(cap), "--ledger", str(quotes))
    assert code == 2
    assert "recorded in the capture" in err and str(quotes) in err
    assert quotes.read_bytes() == before


def test_report_refuses_outputs_on_its_inputs_and_on_each_other(
    capsys: pytest.CaptureFixture[str], quotes: Path, captured: tuple[Path, Path], tmp_path: Path
) -> None:
    cap, led = captured
    saved = {p: p.read_bytes() for p in (cap, led, quotes)}
    for argv in (["-o", str(cap)], ["--ledger", str(led), "-o", str(led)], ["-o", str(quotes)],
                 ["-o", str(tmp_path / "r.html"), "--png", str(tmp_path / "r.html")]):
        code, _, err = _run(capsys, "report", "--capture", str(cap), *argv)
        assert code == 2, argv
        assert "same file" in err, err
    assert {p: p.read_bytes() for p in saved} == saved
    assert not (tmp_path / "r.html").exists()


def test_report_refuses_a_fifo_output(capsys: pytest.CaptureFixture[str], captured: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    code, _, err = _run(capsys, "report", "--capture", str(captured[0]), "-o", str(fifo))
    assert code == 2 and "not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_replay_messages_for_bad_data_and_a_missing_checksum(
    capsys: pytest.CaptureFixture[str], captured: tuple[Path, Path], tmp_path: Path
) -> None:
    cap, _ = captured
    code, _, err = _run(capsys, "replay", str(cap), "--data", "")
    assert code == 2 and "--data is empty" in err
    code, _, err = _run(capsys, "replay", str(cap), "--data", str(tmp_path))
    assert code == 2 and "is a directory" in err and "not there" not in err
    lines = cap.read_bytes().splitlines()
    head = json.loads(lines[0])
    head["source"]["sha256"] = None
    nulled = tmp_path / "nulled.jsonl"
    nulled.write_bytes(b"\n".join([json.dumps(head).encode(), *lines[1:]]) + b"\n")
    code, _, err = _run(capsys, "replay", str(nulled))
    assert code == 2
    assert "records no checksum" in err and "recorded …" not in err


def test_a_huge_field_is_a_data_error_naming_the_line(capsys: pytest.CaptureFixture[str], quotes: Path,
                                                      tmp_path: Path) -> None:
    lines = quotes.read_text().splitlines()
    fat = tmp_path / "fat.csv"
    lines[40] = lines[40].split(",")[0] + "," + "1" * 2_000_000 + "," + lines[40].split(",")[2]
    fat.write_text("\n".join(lines) + "\n")
    code, _, err = _run(capsys, "simulate", "--data", str(fat), "--preset", "oanda")
    assert code == 2, err
    assert "line 41" in err and "2,000,000 characters" in err and "bid" in err
    assert len(err) < 400


def test_a_csv_of_several_row_chunks_loads_every_row_and_names_lines_past_the_first_chunk(tmp_path: Path) -> None:
    from kestrel.data import DataError, load
    from kestrel.data.csvfields import CHUNK_ROWS

    n = CHUNK_ROWS + 1000
    base = np.datetime64("2024-03-05T00:00:00", "ms")
    ts = base + np.arange(n) * np.timedelta64(100, "ms")
    bid = 1.1 + (np.arange(n) % 50) * 0.0001
    stamps = np.datetime_as_string(ts, unit="ms").tolist()
    body = [f"{s}Z,{b:.4f},{b + 0.0002:.4f}" for s, b in zip(stamps, bid.tolist())]
    path = tmp_path / "big.csv"
    path.write_text("ts_utc,bid,ask\n" + "\n".join(body) + "\n")
    loaded = load(path, "oanda")
    assert loaded.report.rows == n
    ticks = loaded.data.ticks
    assert len(ticks.ts) == n
    assert np.array_equal(ticks.ts, ts.astype("datetime64[ns]").astype(np.int64))
    assert np.allclose(ticks.bid, np.round(bid, 4))
    body[CHUNK_ROWS + 10] = "not-a-time,1.1,1.1002"
    path.write_text("ts_utc,bid,ask\n" + "\n".join(body) + "\n")
    with pytest.raises(DataError, match=rf"line {CHUNK_ROWS + 12}\b"):
        load(path, "oanda")


_UNFORMATTED = "PLAN a UNTIL 15:45 RISK maxpos 1  maxloss 10\nWHEN last > 1: BUY 1 MKT\n"


def test_fmt_write_refuses_a_read_only_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = tmp_path / "p.kes"
    doc.write_text(_UNFORMATTED)
    doc.chmod(0o444)
    code, _, err = _run(capsys, "fmt", "--write", str(doc))
    assert code == 2
    assert err.startswith(f"{doc}: cannot write: the file is read-only (mode 444)") and err.count("\n") == 1
    assert doc.read_text() == _UNFORMATTED and stat.S_IMODE(doc.stat().st_mode) == 0o444


def test_atomic_write_keeps_the_mode_and_the_owner(tmp_path: Path) -> None:
    doc = tmp_path / "p.kes"
    doc.write_text(_UNFORMATTED)
    doc.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(doc, 65534, 65534)  # another user's file, rewritten by root
    before = doc.stat()
    atomic_write(doc, b"new\n")
    after = doc.stat()
    assert doc.read_bytes() == b"new\n"
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


def test_a_parquet_timestamp_out_of_range_names_file_column_and_row(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from kestrel.data import DataError, load

    us = [1_700_000_000_000_000 + k * 1_000_000 for k in range(5)]
    us[3] = 253402300799000000  # 9999-12-31T23:59:59
    table = pa.table({"ts_utc": pa.array(us, pa.timestamp("us", tz="UTC")),
                      "bid": [1.1] * 5, "ask": [1.1002] * 5})
    path = tmp_path / "y9999.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError) as err:
        load(path, "oanda")
    text = str(err.value)
    assert str(path) in text and "row 4" in text and "ts_utc" in text and "9999-12-31T23:59:59" in text
    assert "Casting" not in text


@pytest.mark.parametrize("offset", ["+14:01", "-14:59", "+1430"])
def test_utc_offsets_beyond_14_hours_are_refused(tmp_path: Path, offset: str) -> None:
    from kestrel.data import DataError, load

    path = tmp_path / "o.csv"
    path.write_text("ts_utc,bid,ask\n" + "".join(f"2024-03-05T10:00:0{k}{offset},1.1,1.1002\n" for k in range(3)))
    with pytest.raises(DataError, match=r"line 2.*UTC offset out of range \(at most ±14:00\)"):
        load(path, "oanda")
    path.write_text("ts_utc,bid,ask\n" + "".join(f"2024-03-05T10:00:0{k}-14:00,1.1,1.1002\n" for k in range(3)))
    assert len(load(path, "oanda").data.ticks.ts) == 3


def test_epoch_out_of_range_message_states_the_real_span(tmp_path: Path) -> None:
    from kestrel.data.timestamps import BadValue, parse_unix

    with pytest.raises(BadValue, match=r"1684-10-19 08:00 \.\. 2255-03-14 16:00 UTC"):
        parse_unix(np.array(["9000000001"], dtype=str), "unix_s")  # 2255-03-14 16:00:01
    assert parse_unix(np.array(["9000000000"], dtype=str), "unix_s")[0] == 9_000_000_000 * 10**9


@pytest.mark.parametrize(("tick", "message"), [
    ("1e300", "tick size 1e+300 is larger than the smallest price"),
    ("1000", "tick size 1000 is larger than the smallest price"),
    ("1e-300", "tick size must be a number >= 1e-12"),
])
def test_absurd_tick_sizes_are_refused(capsys: pytest.CaptureFixture[str], quotes: Path, tick: str,
                                       message: str) -> None:
    code, _, err = _run(capsys, "simulate", "--data", str(quotes), "--preset", "oanda", "--tick-size", tick)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1


def test_expect_ledger_given_a_binary_file_echoes_no_bytes(
    capsys: pytest.CaptureFixture[str], captured: tuple[Path, Path], tmp_path: Path
) -> None:
    import gzip

    cap, led = captured
    gz = tmp_path / "l.jsonl.gz"
    gz.write_bytes(gzip.compress(led.read_bytes()))
    code, _, err = _run(capsys, "replay", str(cap), "--expect-ledger", str(gz))
    assert code == 1
    assert "not a text file (binary data)" in err
    assert "\ufffd" not in err and all(c.isprintable() for c in err.rstrip("\n"))


def test_a_semicolon_file_loads_with_delimiter_on_the_cli_and_replays(
    capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path
) -> None:
    semi = tmp_path / "semi.csv"
    semi.write_text(quotes.read_text().replace(",", ";"))
    code, _, err = _run(capsys, "simulate", "--data", str(semi))
    assert code == 2 and "pass --delimiter ';'" in err
    cap = tmp_path / "c.jsonl"
    code, _, err = _run(capsys, "simulate", "--data", str(semi), "--delimiter", ";", "--capture", str(cap), "--json")
    assert code == 0, err
    assert json.loads(cap.read_bytes().splitlines()[0])["source"]["delimiter"] == ";"
    code, _, err = _run(capsys, "replay", str(cap), "--json")
    assert code == 0 and "ledger identical" in err, err
    code, out, err = _run(capsys, "view", "VIEW v: quote BUDGET 200", "--data", str(semi), "--delimiter", ";")
    assert code == 0, err
    code, _, err = _run(capsys, "simulate", "--delimiter", ";")
    assert code == 2 and "--delimiter applies to --data PATH only" in err
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--data", str(semi), "--delimiter", ":"])
    assert exit_.value.code == 2 and "expected ',', ';', '|' or 'tab'" in capsys.readouterr().err
