"""`kestrel simulate` over a universe with the session options: `--blind`, `--news`,
`--arm-latency` and `--cadence close`; the capture records them and `kestrel replay` reproduces
the ledger; a news file changed since the capture is refused; `--pace` (a single-symbol
flag) and `--cadence` on one symbol are refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
NEWS = "news/stockbench_dow20_news_20241231_20250730.jsonl"
BLIND_MODULE = "PLAN a ON SYM1\nWHEN pos == 0 AND SYM2.last > 50: BUY $1000 MKT\nPLAN m ON SYM2\nWHEN pos == 0: BUY 10%EQ MKT\n"


def test_a_blind_close_cadence_run_with_news_and_latency_replays(shared_data: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text(BLIND_MODULE)
    capture, ledger = tmp_path / "capture.json", tmp_path / "ledger.jsonl"
    code, out, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                             "--agent", f"fixed:{plans}", "--days", "3", "--blind", "--cadence", "close",
                             "--news", str(shared_data / NEWS), "--capture", str(capture), "--ledger", str(ledger),
                             "--json")
    assert code == 0, err
    summary = json.loads(out)
    held = {h["symbol"]: h["position"] for h in summary["holdings"]}
    assert held["AAPL"] > 0 and held["MSFT"] > 0  # both plans armed on the real symbols, and carried
    doc = json.loads(capture.read_text())
    assert doc["blind"] is True and doc["cadence"] == "close"
    assert doc["news"]["sha256"] == doc["news_sha256"] and len(doc["news_sha256"]) == 64
    assert [t["ordinal"] for t in doc["turns"]] == ["CLOSE"] * 3
    assert doc["turns"][0]["text"] == BLIND_MODULE  # what the agent wrote, over aliases
    code, _, err = run_cli(capsys, "replay", str(capture))
    assert code == 0 and "ledger identical to the captured run's" in err, err
    moved = tmp_path / "news.jsonl"
    moved.write_bytes((shared_data / NEWS).read_bytes() + b"\n")
    code, _, err = run_cli(capsys, "replay", str(capture), "--news", str(moved))
    assert code == 2 and "checksum changed since the capture" in err and len(err.strip().splitlines()) == 1, err


def test_an_arm_latency_run_replays_at_the_recorded_delays(shared_data: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n")
    capture = tmp_path / "capture.json"
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                           "--agent", f"fixed:{plans}", "--days", "2", "--arm-latency", "3600",
                           "--capture", str(capture))
    assert code == 0, err
    doc = json.loads(capture.read_text())
    assert doc["arm_latency"] == 3600.0 and [t["arm_delay_ns"] for t in doc["turns"]] == [3600 * 10**9] * 2
    code, _, err = run_cli(capsys, "replay", str(capture))
    assert code == 0 and "ledger identical" in err, err


def test_single_symbol_flags_are_refused_in_one_line(shared_data: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n")
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                           "--agent", f"fixed:{plans}", "--pace", "10")
    assert code == 2 and "--pace paces a single-symbol session" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_cli(capsys, "simulate", "--cadence", "close")
    assert code == 2 and "--cadence sets a universe session's ordinals" in err, err
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                           "--agent", f"fixed:{plans}", "--cadence", "close", "--checkpoints", "11:00")
    assert code == 2 and "one ordinal per session" in err, err


@pytest.mark.parametrize("options", [
    ("--blind", "--cadence", "close", "--news", NEWS),
    ("--arm-latency", "3600", "--cadence", "close"),
])
def test_the_options_give_one_ledger_and_capture_on_every_backend(shared_data: Path, tmp_path: Path,
                                                                  options: tuple[str, ...]) -> None:
    from kestrel.cli import main

    plans = tmp_path / "module.kes"
    plans.write_text(BLIND_MODULE if "--blind" in options else "PLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n")
    flags = [str(shared_data / o) if o == NEWS else o for o in options]
    outs = {}
    for backend in ("direct", "asyncio", "trio"):
        ledger, capture = tmp_path / f"{backend}.jsonl", tmp_path / f"{backend}.json"
        assert main(["simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                     "--agent", f"fixed:{plans}", "--days", "3", *flags, "--backend", backend,
                     "--ledger", str(ledger), "--capture", str(capture)]) == 0
        outs[backend] = (ledger.read_bytes(), capture.read_bytes())
    assert outs["asyncio"] == outs["direct"] == outs["trio"]
    assert b'"event":"fill"' in outs["direct"][0]
    doc = json.loads(outs["trio"][1])
    assert doc["cadence"] == "close" and [t["ordinal"] for t in doc["turns"]] == ["CLOSE"] * 3
    assert doc["turns"][0]["applied"].startswith("at the next open")


def test_lookback_run_reads_earlier_sessions_and_session_refuses_the_window(shared_data: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN a ON AAPL\nWHEN pos == 0 AND MSFT.chg(1d) > -100%: BUY 2 MKT\n")
    common = ["simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
              "--agent", f"fixed:{plans}", "--days", "3", "--json"]
    code, out, err = run_cli(capsys, *common)
    assert code == 0, err
    held = {h["symbol"]: h["position"] for h in json.loads(out)["holdings"]}
    assert held["AAPL"] == 2  # MSFT's change over a day is defined at the open from the sessions before
    code, out, err = run_cli(capsys, *common, "--lookback", "session")
    assert code == 0, err
    doc = json.loads(out)
    assert {h["symbol"]: h["position"] for h in doc["holdings"]}["AAPL"] == 0
    assert all(t["applied"].startswith("refused") and "longer than the session" in t["applied"] for t in doc["turns"])
    code, _, err = run_cli(capsys, "simulate", "--lookback", "run")
    assert code == 2 and "--lookback" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("cadence", ["close", "open"])
def test_a_daily_market_buy_fills_at_the_next_open_read_from_the_raw_file(
        shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cadence: str) -> None:
    import pandas as pd  # type: ignore[import-untyped]  # exchange-calendars' own dependency

    symbols = ("AMZN", "BA", "GS", "HD")
    plans = tmp_path / "module.kes"
    plans.write_text("".join(f"PLAN b{i} ON {s}\nWHEN pos == 0: BUY 2 MKT\n" for i, s in enumerate(symbols)))
    ledger = tmp_path / "ledger.jsonl"
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", ",".join(symbols),
                           "--agent", f"fixed:{plans}", "--date", "2025-05-02", "--days", "2", "--cadence", cadence,
                           "--ledger", str(ledger))
    assert code == 0, err
    fills = [e for e in map(json.loads, ledger.read_text().splitlines()) if e.get("event") == "fill"]
    # CLOSE: decided after 05-01's close, filled at 05-02's open; OPEN: 05-01's OPEN buys at
    # 05-01's open and the position is held through 05-02 (daily bars carry)
    day = "2025-05-02" if cadence == "close" else "2025-05-01"
    raw = pd.read_parquet(shared_data / STOCKBENCH)
    opens = raw[raw["date"].astype(str).str[:10] == day].set_index("symbol")["open"]
    assert sorted(f["symbol"] for f in fills) == sorted(symbols)  # one buy each: held across the sessions
    for f in fills:
        assert (f["side"], f["qty"]) == ("buy", 2) and f["price"] == float(opens[f["symbol"]]), f


def test_a_universe_run_writes_its_evidence(shared_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    plans = tmp_path / "module.kes"
    plans.write_text("PLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n")
    replies = tmp_path / "replies.txt"  # each session: a VIEW, then the module
    replies.write_text("VIEW v: watchlist, quote(MSFT)\n---\nPLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n---\n"
                       "VIEW v: portfolio\n---\nPASS\n")
    evidence, ledger = tmp_path / "evidence.jsonl", tmp_path / "ledger.jsonl"
    code, out, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                             "--agent", f"replies:{replies}", "--days", "2", "--evidence", str(evidence),
                             "--ledger", str(ledger), "--json")
    assert code == 0, err
    records = [json.loads(line) for line in evidence.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["view-request", "view-request"] and all(r["ordinal"] == "OPEN" for r in records)
    assert [t["applied"].split(":")[0] for t in json.loads(out)["turns"]] == ["armed m on MSFT", "passed"]
    assert '"symbol":"MSFT"' in ledger.read_text()
    code, _, err = run_cli(capsys, "simulate", "--data", str(shared_data / STOCKBENCH), "--symbols", "AAPL,MSFT",
                           "--agent", f"fixed:{plans}", "--png", str(tmp_path / "x.png"))
    assert code == 2 and err.count("kestrel simulate:") == 1, err


def test_run_session_takes_an_iso_date_and_refuses_what_is_not_one(shared_data: Path) -> None:
    import datetime as dt

    from kestrel.data.universe import load_universe
    from kestrel.session.options import SessionError
    from kestrel.session.portfolio import ModuleAgent
    from kestrel.session.runner import run_session

    u = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "MSFT"]).universe
    agent = ModuleAgent("PLAN m ON MSFT\nWHEN pos == 0: BUY 3 MKT\n")
    by_text = run_session(u, agent, date="2025-03-14", days=2)
    by_date = run_session(u, agent, date=dt.date(2025, 3, 14), days=2)
    assert by_text.capture.dates == ("2025-03-13", "2025-03-14") == by_date.capture.dates
    assert by_text.ledger.to_jsonl() == by_date.ledger.to_jsonl()
    with pytest.raises(SessionError, match="like 2025-03-14"):
        run_session(u, agent, date="14/03/2025")
