"""`kestrel sweep`'s error messages name what works in `kestrel sweep`: no flag it lacks
(--api-key-env, --crossed, --model), and the `--data 'PATH|crossed=drop'` form they point to works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main


def _err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def _sweep_flags(capsys: pytest.CaptureFixture[str]) -> set[str]:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    return {w.strip(",[]") for w in capsys.readouterr().out.split() if w.startswith("--")}


def _named_flags(message: str) -> set[str]:
    return {w.strip(",.;:()'\"[]") for w in message.split() if w.startswith("--")}


def test_a_missing_key_names_the_variable_and_no_missing_flag(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    flags = _sweep_flags(capsys)
    err = _err(capsys, ["sweep", "--agents", "baseline,openai:gpt-4o", "--out", str(tmp_path), "--jobs", "1"])
    assert "OPENAI_API_KEY" in err and "environment" in err
    assert _named_flags(err) <= flags, err
    err = _err(capsys, ["sweep", "--agents", "openai", "--out", str(tmp_path), "--jobs", "1"])
    assert "openai:MODEL" in err and _named_flags(err) <= flags, err


def test_crossed_quotes_point_to_the_data_option_that_works(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path, shared_data: Path) -> None:
    fxcm = shared_data / "fx_quote_ticks" / "lean_fxcm_eurusd_quote_ticks_20140501_20140515.parquet"
    flags = _sweep_flags(capsys)
    err = _err(capsys, ["sweep", "--agents", "baseline", "--data", str(fxcm), "--out", str(tmp_path / "a"),
                        "--jobs", "1"])
    assert "crossed quote" in err and _named_flags(err) <= flags, err
    assert f"--data '{fxcm}|crossed=drop'" in err
    assert main(["sweep", "--agents", "baseline", "--data", f"{fxcm}|crossed=drop", "--date", "2014-05-13",
                 "--out", str(tmp_path / "b"), "--jobs", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ran"] == 1
