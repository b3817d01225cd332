"""`kestrel panes` and `kestrel view`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main


def test_panes_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["panes"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split("  ")[0] == "bars(tf=5m, n=12)" and lines[1].split()[-1] == "forming)"
    news = next(line for line in lines if line.startswith("news("))
    assert news.startswith("news(n=5, symbol=self, since=5)  dated headlines")
    assert "bars.symbol: symbol default self, a symbol of the session, first" in out
    watch = next(line for line in lines if line.startswith("watchlist"))
    assert watch.endswith("per symbol last, 1 and 5 session change, rvol, position")
    assert "portfolio.n: count default 20, 1..100" in out and "events.n: count default 5, 1..20" in out
    assert "kernel (reserved, always in the briefing): clock, ordinal, cutoff, rules, budget, grammar" in out
    assert main(["panes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in doc["panes"]] == ["quote", "bars", "levels", "stats", "tape", "position", "plan",
                                                "news", "watchlist", "portfolio", "events"]
    assert [p["name"] for p in doc["panes"] if p["args"] and p["args"][0]["type"] == "symbol"] == [
        "quote", "bars", "levels", "stats", "tape", "position", "plan"]  # per-symbol panes: the symbol first
    assert doc["panes"][7]["args"][1] == {"name": "symbol", "type": "ident", "default": "self", "range": "a word",
                                           "help": "self (the session's symbol), all, or a symbol"}
    assert doc["panes"][1]["args"][0]["type"] == "symbol"
    assert doc["panes"][1]["args"][1] == {"name": "tf", "type": "duration", "default": "5m",
                                          "range": "1m..1d, a multiple of 1m", "help": "bar timeframe, 1m..1d"}
    assert doc["budget"] == {"default": 900, "min": 64, "max": 4000}


def test_view_on_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", "VIEW v: quote, tape(2) BUDGET 200", "--at", "10:30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CLOCK SAMPLE #1 10:30 cutoff 10:25:00 session 2024-04-15")
    assert "\n\nVIEW v budget 200\nQUOTE SAMPLE 10:24:59\n" in out
    assert main(["view", "VIEW v: tape(1)", "--at", "10:30", "--no-kernel", "--guard", "0m"]) == 0
    assert capsys.readouterr().out.startswith("TAPE last 1\ntime ")


def test_view_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["view", "VIEW v: qoute"]) == 1
    assert "did you mean 'quote'?" in capsys.readouterr().err
    assert main(["view", "PASS"]) == 1
    assert "expected one VIEW statement, got Pass" in capsys.readouterr().err
    assert main(["view", "VIEW v: quote", "--at", "25:00"]) == 2
    assert "--at must be a time hh:mm, got '25:00'" in capsys.readouterr().err
    assert main(["view", "VIEW v: quote", "--guard", "soon"]) == 2
    assert "--guard must be seconds like 300 or a duration like 30s, 5m or 1h, got 'soon'" in capsys.readouterr().err
    bad = tmp_path / "b.csv"
    bad.write_text("")
    assert main(["view", "VIEW v: quote", "--data", str(bad), "--preset", "oanda"]) == 2
    assert capsys.readouterr().err == f"kestrel view: {bad}: file is empty: expected a header line and data rows\n"


def test_view_on_shared_file_with_crossed_policy(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(shared_data / "fx_quote_ticks/lean_fxcm_eurusd_quote_ticks_20140501_20140515.parquet")
    assert main(["view", "VIEW v: quote", "--data", path]) == 2
    assert "crossed quote" in capsys.readouterr().err
    assert main(["view", "VIEW v: quote", "--data", path, "--crossed", "drop", "--no-kernel"]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("QUOTE EURUSD ")
    assert "116871 crossed quotes (ask < bid): dropped 116871" in cap.err


def test_view_tick_size_flag(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(shared_data / "bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv")
    assert main(["view", "VIEW v: tape(1)", "--data", path, "--no-kernel"]) == 0
    cap = capsys.readouterr()
    assert "(preset cme_bars detected, tick size 5e-05 inferred)" in cap.err
    assert main(["view", "VIEW v: tape(1)", "--data", path, "--tick-size", "0.00005", "--no-kernel"]) == 0
    assert "inferred" not in capsys.readouterr().err
    assert main(["view", "VIEW v: tape(1)", "--data", path, "--tick-size", "0.0001"]) == 2
    assert "is not a multiple of the tick size 0.0001" in capsys.readouterr().err


def test_view_tick_size_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["view", "VIEW v: quote", "--tick-size", "-1"])
    assert info.value.code == 2
    assert "expected a positive number like 0.01, got '-1'" in capsys.readouterr().err
    assert main(["view", "VIEW v: quote", "--tick-size", "0.01"]) == 2
    assert capsys.readouterr().err == (
        "kestrel view: --tick-size applies to --data PATH only (the sample is generated clean, with a fixed "
        "instrument)\n")
    assert main(["view", "VIEW v: quote", "--crossed", "drop"]) == 2
