"""The outputs of a universe run through the CLI: the portfolio report as text, JSON and HTML,
the capture that `kestrel replay` reproduces byte for byte (from another folder, the universe
recorded in it), `kestrel report` of the capture with or without its ledger; bad inputs fail
closed with one line. On the shared StockBench universe (skipped when absent) and a small
generated long-format file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
MODULE = "PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\nPLAN m ON MSFT\nWHEN pos == 0: BUY 5 MKT\n"
DATES = ["2025-03-03", "2025-03-04", "2025-03-05", "2025-03-06", "2025-03-07"]


def _generated(path: Path) -> Path:
    """Two symbols, eight sessions of daily bars in one long-format CSV; prices follow a fixed
    rule, so the test can compute the run's figures from the rows itself."""
    rows = ["date,symbol,open,high,low,close,volume"]
    days = ["2024-03-04", "2024-03-05", "2024-03-06", "2024-03-07", "2024-03-08", "2024-03-11", "2024-03-12",
            "2024-03-13"]
    for i, d in enumerate(days):
        for sym, base, step in (("AAA", 50.0, 1.0), ("BBB", 20.0, -0.5)):
            o = base + step * i
            c = o + step / 2
            rows.append(f"{d},{sym},{o:.2f},{max(o, c) + 0.25:.2f},{min(o, c) - 0.25:.2f},{c:.2f},{1000 + i}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def stockbench_run(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    plans = tmp_path / "module.kes"
    plans.write_text(MODULE)
    out = {"ledger": tmp_path / "ledger.jsonl", "capture": tmp_path / "capture.json", "page": tmp_path / "run.html"}
    code, text, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols",
                              "AAPL,MSFT,GS", "--agent", f"fixed:{plans}", "--days", "5", "--date", "2025-03-07",
                              "--end-of-day", "carry", "--ledger", str(out["ledger"]), "--capture",
                              str(out["capture"]), "--report", str(out["page"]))
    assert code == 0, err
    (tmp_path / "stdout.txt").write_text(text)
    out["stdout"] = tmp_path / "stdout.txt"
    return out


def test_simulate_prints_the_portfolio_report_and_writes_its_page(stockbench_run: dict[str, Path]) -> None:
    text = stockbench_run["stdout"].read_text().splitlines()
    assert text[0] == "Portfolio: 3 symbols over 5 sessions (2025-03-03 .. 2025-03-07), capital 100000.00 USD"
    assert any(line.startswith("  equal-weight buy-and-hold: net PnL ") for line in text)
    assert any(line.startswith("  cash: net PnL +0.00") for line in text)
    by_symbol = {line.split()[0]: line.split() for line in text if line[:4] in ("AAPL", "MSFT", "GS  ")}
    assert {s: cells[5] for s, cells in by_symbol.items()} == {"AAPL": "10", "MSFT": "5", "GS": "0"}
    assert [line.split()[0] for line in text if line[:4] == "2025"] == DATES
    assert text[-1].startswith("account check: ") and "first mismatch" not in text[-1]
    page = stockbench_run["page"].read_text()
    assert page.lower().startswith("<!doctype html>")
    assert "Attribution" in page and "AAPL" in page and "<script" not in page


def test_json_is_the_portfolio_report_with_the_run(shared_data: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text(MODULE)
    ledger = tmp_path / "ledger.jsonl"
    code, out, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                             "--agent", f"fixed:{plans}", "--days", "5", "--date", "2025-03-07", "--end-of-day",
                             "carry", "--ledger", str(ledger), "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["symbols"] == ["AAPL", "MSFT"] and body["dates"] == DATES and body["sessions"] == 5
    assert set(body["baselines"]) == {"equal-weight buy-and-hold", "cash"}
    fills = [json.loads(line) for line in ledger.read_bytes().splitlines() if b'"event":"fill"' in line]
    assert body["fills"] == len(fills) == 2
    assert {a["symbol"]: a["final_position"] for a in body["attribution"]} == {"AAPL": 10.0, "MSFT": 5.0}
    assert body["account_check"]["mismatches"] == 0 and body["account_check"]["lines"] > 0


def test_replay_from_another_folder_reproduces_the_ledger(stockbench_run: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = tmp_path / "again.jsonl"
    code, out, err = run_cli(capsys, "replay", str(stockbench_run["capture"]), "--ledger", str(again),
                             "--expect-ledger", str(stockbench_run["ledger"]))
    assert code == 0, err
    assert again.read_bytes() == stockbench_run["ledger"].read_bytes()
    assert "ledger identical to the captured run's" in err
    assert out.splitlines()[0].startswith("Portfolio: 3 symbols over 5 sessions")


def test_replay_of_an_edited_capture_reports_the_difference(stockbench_run: dict[str, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    edited = tmp_path / "edited.json"
    edited.write_bytes(stockbench_run["capture"].read_bytes().replace(b"BUY 10 MKT", b"BUY 11 MKT"))
    code, _, err = run_cli(capsys, "replay", str(edited))
    assert code == 1
    assert "the replayed ledger differs from the captured run's" in err


def test_report_of_a_capture_with_and_without_its_ledger(stockbench_run: dict[str, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from_ledger, replayed = tmp_path / "a.html", tmp_path / "b.html"
    code, _, err = run_cli(capsys, "report", "--capture", str(stockbench_run["capture"]), "--ledger",
                           str(stockbench_run["ledger"]), "-o", str(from_ledger))
    assert code == 0, err
    code, _, err = run_cli(capsys, "report", "--capture", str(stockbench_run["capture"]), "-o", str(replayed))
    assert code == 0, err
    assert from_ledger.read_bytes() == replayed.read_bytes() == stockbench_run["page"].read_bytes()
    other = tmp_path / "other.jsonl"
    other.write_bytes(stockbench_run["ledger"].read_bytes()[:-1] + b" \n")
    code, _, err = run_cli(capsys, "report", "--capture", str(stockbench_run["capture"]), "--ledger", str(other),
                           "-o", str(tmp_path / "c.html"))
    assert code == 2 and "is not this capture's ledger" in err.strip().splitlines()[-1]
    assert not (tmp_path / "c.html").exists()


def test_a_generated_universe_held_from_its_first_fill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _generated(tmp_path / "universe.csv")
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN a ON AAA\nWHEN pos == 0: BUY 7 MKT\nPLAN b ON BBB\nWHEN pos == 0: BUY 3 MKT\n")
    ledger, capture = tmp_path / "ledger.jsonl", tmp_path / "capture.json"
    code, out, err = run_cli(capsys, "simulate", "--data", str(data), "--agent", f"fixed:{plans}", "--days", "8",
                             "--capital", "5000", "--end-of-day", "carry", "--ledger", str(ledger), "--capture",
                             str(capture), "--json")
    assert code == 0, err
    body = json.loads(out)
    fills = {e["symbol"]: e for e in map(json.loads, ledger.read_bytes().splitlines()) if e["event"] == "fill"}
    assert set(fills) == {"AAA", "BBB"} and body["fills"] == 2
    # the last close of each symbol from the rows written above
    last_close = {"AAA": 50.0 + 7 * 1.0 + 0.5, "BBB": 20.0 - 7 * 0.5 - 0.25}
    pnl = {s: q * (last_close[s] - fills[s]["price"]) - fills[s]["fee"] for s, q in (("AAA", 7), ("BBB", 3))}
    got = {a["symbol"]: a["pnl"] for a in body["attribution"]}
    assert got == pytest.approx(pnl, abs=0.005)
    assert body["metrics"]["net_pnl"] == pytest.approx(sum(pnl.values()), abs=0.01)
    assert body["metrics"]["final_equity"] == pytest.approx(5000 + sum(pnl.values()), abs=0.01)
    again = tmp_path / "again.jsonl"
    code, _, err = run_cli(capsys, "replay", str(capture), "--ledger", str(again))
    assert code == 0, err
    assert again.read_bytes() == ledger.read_bytes()


def test_bad_inputs_fail_closed_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _generated(tmp_path / "universe.csv")
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN a ON AAA\nWHEN pos == 0: BUY 7 MKT\n")
    capture = tmp_path / "capture.json"
    code, _, err = run_cli(capsys, "simulate", "--data", str(data), "--agent", f"fixed:{plans}", "--days", "2",
                           "--png", str(tmp_path / "x.png"))
    assert code == 2 and "--report" in err.strip().splitlines()[-1]
    code, _, err = run_cli(capsys, "simulate", "--data", str(data), "--agent", f"fixed:{plans}", "--days", "2",
                           "--pace", "realtime")  # not taken: refused, not ignored
    assert code == 2 and "--pace paces a single-symbol session" in err.strip().splitlines()[-1]
    code, _, err = run_cli(capsys, "simulate", "--data", str(data), "--agent", f"fixed:{plans}", "--days", "2",
                           "--capture", str(capture), "--ledger", str(capture))
    assert code == 2 and len(err.strip().splitlines()) == 1 and not capture.exists()
    code, _, err = run_cli(capsys, "simulate", "--data", str(data), "--agent", f"fixed:{plans}", "--days", "2",
                           "--capture", str(capture))
    assert code == 0, err
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'{"universe":{"data":1}}\n')
    code, _, err = run_cli(capsys, "replay", str(broken))
    assert code == 2 and "not a portfolio capture" in err.strip().splitlines()[-1]
    code, _, err = run_cli(capsys, "replay", str(capture), "--data", str(tmp_path / "gone.csv"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "gone.csv" in err
    data.write_text("".join(line + "\n" for line in data.read_text().splitlines() if ",AAA," not in line))
    code, _, err = run_cli(capsys, "replay", str(capture))
    assert code == 2 and "AAA" in err.strip().splitlines()[-1]
