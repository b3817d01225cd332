"""`--columns` on the CLI: a file with its own column names runs through `simulate`, is recorded
in the capture's data source and replays to the same ledger; bad mappings are one-line usage
errors; a long-format file takes `--symbol`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import quotes_csv, run_cli


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cols")
    src = quotes_csv(d / "q.csv", sessions=1, seed=5)
    out = d / "EURUSD.csv"
    out.write_text(src.read_text().replace("ts_utc,bid,ask", "When,Best Bid,Best Ask", 1))
    return out


def test_columns_map_a_file_through_simulate_and_replay(capsys: pytest.CaptureFixture[str], renamed: Path,
                                                        tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "simulate", "--data", str(renamed))
    assert code == 2 and "no timestamp column" in err and "--columns ts=COLUMN" in err
    cap = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "simulate", "--data", str(renamed), "--columns", "ts=When,bid=Best Bid,ask=Best Ask",
                           "--capture", str(cap), "--json")
    assert code == 0, err
    source = json.loads(cap.read_bytes().splitlines()[0])["source"]
    assert source["columns"] == "ts=When,bid=Best Bid,ask=Best Ask" and source["symbol"] == "EURUSD"
    code, _, err = run_cli(capsys, "replay", str(cap), "--json")
    assert code == 0 and "ledger identical" in err, err


@pytest.mark.parametrize(("mapping", "message"), [
    ("ts=When,bid=Best Bid,ask=Nope", "no column 'Nope' (--columns ask=...); the columns are When, Best Bid, Best Ask"),
    ("ts=When,bid", "--columns: 'bid' is not role=column"),
    ("ts=When,quote=Best Bid", "--columns: unknown role 'quote'"),
])
def test_bad_mappings_are_one_line_usage_errors(capsys: pytest.CaptureFixture[str], renamed: Path, mapping: str,
                                                message: str) -> None:
    code, _, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(renamed), "--columns", mapping)
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_columns_apply_to_a_file_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "view", "VIEW v: quote", "--columns", "ts=When")
    assert code == 2 and "--columns applies to --data PATH only" in err


def test_a_long_format_file_takes_symbol(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "long.csv"
    p.write_text("date,symbol,open,high,low,close,volume\n2024-12-23,AAA,10,11,9,10.5,100\n"
                 "2024-12-23,BBB,20,21,19,20.5,50\n2024-12-24,AAA,10.5,11,10,10.8,200\n2024-12-24,BBB,20.5,21,20,20.8,60\n")
    code, _, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(p))  # a universe: quote names a member
    assert code == 1 and err.splitlines()[-1].endswith(
        "quote: name the symbol in a universe session: quote(AAA); or view one symbol of the data alone with "
        "--symbol AAA")
    code, out, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(p), "--symbol", "BBB")
    assert code == 0, err
    assert "QUOTE BBB" in out and "2 rows → 10 ticks in 2 sessions" in err
