"""`kestrel simulate` over a universe: `--data` a long-format file with `--symbols`, one account
(`--capital`, `--no-short`), a module of plans ON each symbol; the ledger and capture written,
the capture replays to the same ledger; a bad symbol is a one-line usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.data.universe import load_universe
from kestrel.session.portfolio import PortfolioCapture, replay

from cli_helpers import run_cli

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
MODULE = "PLAN a ON AAPL\nWHEN pos == 0: BUY 10 MKT\nPLAN m ON MSFT\nWHEN pos == 0: SELL 5 MKT\n"


def test_simulate_a_universe_on_one_account(shared_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text(MODULE)
    ledger, capture = tmp_path / "ledger.jsonl", tmp_path / "capture.json"
    code, out, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT,GS",
                             "--capital", "10000", "--no-short", "--agent", f"fixed:{plans}", "--days", "5",
                             "--date", "2025-03-07", "--end-of-day", "carry", "--ledger", str(ledger),
                             "--capture", str(capture), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["symbols"] == ["AAPL", "GS", "MSFT"] and summary["capital"] == 10000.0
    held = {h["symbol"]: h["position"] for h in summary["holdings"]}
    assert held == {"AAPL": 10, "GS": 0, "MSFT": 0}
    lines = ledger.read_bytes().splitlines()
    assert any(b'"reason":"no-short: MSFT would reach -5"' in ln for ln in lines)
    u = load_universe(shared_data / STOCKBENCH).universe
    again = replay(u, PortfolioCapture.from_json(capture.read_bytes()))
    assert again.ledger.to_jsonl() == ledger.read_bytes()


def test_an_unknown_symbol_is_a_usage_error(shared_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text(MODULE)
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,ZZZ",
                           "--agent", f"fixed:{plans}")
    assert code == 2
    assert err.strip().splitlines()[-1].endswith(
        "no rows of symbol ZZZ in the data (it holds AAPL, AMGN, AMZN, AXP, BA, CAT, CRM, GS, HD, HON, IBM, JNJ "
        "(and 8 more); a symbol is matched exactly, as the file spells it)")
