"""`kestrel check` and `kestrel fmt`: exit codes, stderr lines, JSON, stdin, --check/--write."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kestrel.cli import main

VALID = "PLAN a\nWHEN last > 1: FLAT\n"
UGLY = "plan a when last>1 :flat"
INVALID = "PLAN a\nWHEN lst > 1: FLAT\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def test_check_valid_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", write(tmp_path, "a.kes", VALID)]) == 0
    assert capsys.readouterr().err == ""


def test_check_invalid_exits_1_with_file_line_col(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.kes", VALID)
    bad = write(tmp_path, "bad.kes", INVALID)
    assert main(["check", good, bad]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{bad}:2:6: unknown series `lst` (hint: did you mean `last`?)"]


def test_check_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, "bad.kes", INVALID)
    assert main(["check", "--json", bad]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report[0]["file"] == bad and report[0]["ok"] is False
    d = report[0]["diagnostics"][0]
    assert (d["line"], d["column"], d["code"], d["hint"]) == (2, 6, "unknown-name", "did you mean `last`?")


def test_check_missing_file_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.kes")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_check_non_utf8_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bin.kes"
    path.write_bytes(b"PASS \xff")
    assert main(["check", str(path)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_check_without_files_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check"])
    assert exc.value.code == 2


def test_check_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stdin(monkeypatch, INVALID)
    assert main(["check", "-"]) == 1
    assert capsys.readouterr().err.startswith("<stdin>:2:6: unknown series")


def test_fmt_prints_canonical_text(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stdin(monkeypatch, UGLY)
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == VALID


def test_fmt_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fmt", "--check", write(tmp_path, "ok.kes", VALID)]) == 0
    ugly = write(tmp_path, "ugly.kes", UGLY)
    assert main(["fmt", "--check", ugly]) == 1
    assert f"{ugly}: not in canonical form" in capsys.readouterr().err
    assert Path(ugly).read_text() == UGLY


def test_fmt_write_rewrites_and_keeps_the_header_comment(tmp_path: Path) -> None:
    path = write(tmp_path, "u.kes", "# my plan\n\n" + UGLY)
    assert main(["fmt", "--write", path]) == 0
    assert Path(path).read_text() == "# my plan\n" + VALID
    assert main(["fmt", "--check", path]) == 0


def test_fmt_write_refuses_to_drop_inner_comments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "PLAN a # keep me\nWHEN last > 1: FLAT\n"
    path = write(tmp_path, "c.kes", text)
    assert main(["fmt", "--write", path]) == 1
    assert "comments" in capsys.readouterr().err
    assert Path(path).read_text() == text


def test_fmt_invalid_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fmt", write(tmp_path, "bad.kes", INVALID)]) == 1
    assert "unknown series" in capsys.readouterr().err


def test_fmt_write_stdin_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fmt", "--write", "-"]) == 2


def test_the_readme_plan_passes_kestrel_check(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## A plan in thirty seconds", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```")[1::2]
    assert blocks and "PLAN orb" in blocks[0]
    for i, block in enumerate(blocks):
        assert main(["check", write(tmp_path, f"readme{i}.kes", block)]) == 0


def test_unreadable_files_are_all_reported_and_nothing_is_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ugly = write(tmp_path, "ugly.kes", UGLY)
    missing1, missing2 = str(tmp_path / "no1.kes"), str(tmp_path / "no2.kes")
    assert main(["fmt", "--write", ugly, missing1, missing2]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err] == [missing1, missing2]
    assert Path(ugly).read_text() == UGLY  # a usage error rewrites nothing
    bad = write(tmp_path, "bad.kes", INVALID)
    assert main(["check", "--json", bad, missing1]) == 2
    out = capsys.readouterr()
    assert f"{missing1}: cannot read" in out.err
    # check reports every file: the unreadable one with its error, the others checked all the same
    doc = json.loads(out.out)
    assert [(d["file"], d["ok"]) for d in doc] == [(bad, False), (missing1, False)]
    assert doc[0]["diagnostics"] and "error" not in doc[0]
    assert doc[1] == {"file": missing1, "ok": False, "diagnostics": [],
                      "error": f"{missing1}: cannot read: No such file or directory"}


def test_check_reports_every_file_of_a_batch_a_non_utf8_one_among_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path, "good.kes", VALID)
    bad = write(tmp_path, "bad.kes", INVALID)
    latin = tmp_path / "latin1.kes"
    latin.write_bytes("PLAN caf\xe9\nWHEN last > 1: FLAT\n".encode("latin-1"))
    after = write(tmp_path, "after.kes", VALID)
    assert main(["check", good, str(latin), bad, after]) == 2  # a file it could not read: usage error
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{latin}: not UTF-8 text (byte 8)"
    assert any(line.startswith(f"{bad}:") for line in err[1:])  # the invalid file after it is checked
    assert main(["check", "--json", good, str(latin), after]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [(d["file"], d["ok"]) for d in doc] == [(good, True), (str(latin), False), (after, True)]
    assert main(["check", good, after]) == 0 and main(["check", good, bad]) == 1


def test_crlf_and_bom_files_check_clean_and_fmt_normalises_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "win.kes"
    path.write_bytes(b"\xef\xbb\xbfPLAN a\r\nWHEN last > 1: FLAT\r\n")
    assert main(["check", str(path)]) == 0
    assert main(["fmt", "--check", str(path)]) == 1
    assert main(["fmt", "--write", str(path)]) == 0
    assert path.read_bytes() == VALID.encode()


def test_fmt_keeps_the_leading_comment_of_a_bom_file(tmp_path: Path) -> None:
    path = tmp_path / "c.kes"
    path.write_bytes(b"\xef\xbb\xbf# why\r\n" + UGLY.encode())
    assert main(["fmt", "--write", str(path)]) == 0
    assert path.read_text() == "# why\n" + VALID
