"""Complete and partial sessions: the default session, the partial mark in results and the
CLI warning, and the stand-down reason when no market data precedes the OPEN cutoff."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kestrel.agents.baseline import BaselineAgent
from kestrel.data import load, load_sample
from kestrel.market import MarketData
from kestrel.market.ticks import Ticks
from kestrel.session.coverage import coverage, default_session_index
from kestrel.session.protocol import StandDownTurn
from kestrel.session.runner import SessionOptions, run_session

OANDA = "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
NS_PER_H = 3_600 * 10**9


def truncated(data: MarketData, hours_into_last: float) -> MarketData:
    """The sample with its last session cut `hours_into_last` hours after the open."""
    last = data.sessions[-1]
    end = data.ticks.index_at(last.open_ns + int(hours_into_last * NS_PER_H), side="left")
    return MarketData(data.symbol, data.tick_size, data.ticks.slice(0, end), data.sessions)


def test_a_session_spanned_by_its_ticks_is_complete() -> None:
    data = load_sample()  # 09:30-16:00, one tick a second
    assert all(coverage(data, s).complete for s in data.sessions)
    assert default_session_index(data) == len(data.sessions) - 1


def test_a_session_cut_short_is_partial_and_not_the_default() -> None:
    data = truncated(load_sample(), 3.0)  # 3 h of a 6.5 h session
    last = coverage(data, data.sessions[-1])
    assert not last.complete and last.ticks == 3 * 3600
    assert last.describe() == (
        f"partial session {data.sessions[-1].date}: ticks 09:30:00-12:29:59 America/New_York "
        "span 3.0 h of its 6.5 h (10,800 ticks)"
    )
    assert default_session_index(data) == len(data.sessions) - 2
    # the edge: 10% of 6.5 h is 39 minutes; ticks stopping 30 minutes early are complete
    assert coverage(truncated(load_sample(), 6.0), data.sessions[-1]).complete


def test_the_default_run_takes_the_last_complete_session_and_marks_partial_ones() -> None:
    data = truncated(load_sample(), 3.0)
    result = run_session(data, BaselineAgent())
    assert [d.date for d in result.days] == [data.sessions[-2].date.isoformat()]
    assert result.days[0].partial is False
    chosen = run_session(data, BaselineAgent(), date=data.sessions[-1].date, days=2)
    assert [d.partial for d in chosen.days] == [False, True]
    assert chosen.days[1].coverage.startswith("partial session")


def test_without_any_complete_session_the_last_one_runs_marked_partial() -> None:
    sample = load_sample()
    one = MarketData(sample.symbol, sample.tick_size, truncated(sample, 1.0).ticks, sample.sessions[-1:])
    result = run_session(one, BaselineAgent())
    assert result.days[0].partial


def test_oanda_defaults_to_the_last_complete_session(shared_data: Path) -> None:
    data = load(shared_data / OANDA).data
    last = coverage(data, data.sessions[-1])
    assert last.date == "2014-05-15" and last.ticks == 1450 and not last.complete
    result = run_session(data, BaselineAgent())
    assert [d.date for d in result.days] == ["2014-05-14"] and not result.days[0].partial
    stub = run_session(data, BaselineAgent(), date=dt.date(2014, 5, 15))
    assert stub.days[0].partial


def test_no_market_data_before_the_open_cutoff_says_so(shared_data: Path) -> None:
    data = load(shared_data / OANDA).data  # the file starts at 20:00 New York on 2014-04-30
    result = run_session(data, BaselineAgent(), SessionOptions(), date=dt.date(2014, 4, 30))
    assert result.days[0].outcomes[0].turn == StandDownTurn(
        "no market data before the 17:00 cutoff (snapshot at 16:55:00)"
    )
    assert result.days[0].partial


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kestrel", "simulate", *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_warns_once_for_a_partial_date_and_marks_it_in_json(shared_data: Path) -> None:
    path = str(shared_data / OANDA)
    stub = _cli("--data", path, "--date", "2014-05-15", "--json", "--backend", "direct")
    assert stub.returncode == 0, stub.stderr
    load_report = ("kestrel simulate: 532903 rows → 532903 ticks in 12 sessions (preset oanda detected, tick size "
                   "1e-05 inferred)")
    lines = stub.stderr.splitlines()
    assert len(lines) == 2 and lines[0] == load_report and lines[1].startswith(
        "kestrel simulate: warning: partial session 2014-05-15: ticks 17:02:09-19:59:56"
    )
    day = json.loads(stub.stdout)["days"][0]
    assert day["partial"] is True and "1,450 ticks" in day["coverage"]
    default = _cli("--data", path, "--json", "--backend", "direct")
    assert default.returncode == 0 and default.stderr == load_report + "\n"  # the load report only
    summary = json.loads(default.stdout)
    assert summary["dates"] == ["2014-05-14"] and summary["days"][0]["partial"] is False
    text = _cli("--data", path, "--date", "2014-05-15", "--backend", "direct")
    assert "partial session 2014-05-15" in text.stdout


def test_complete_sessions_print_no_warning() -> None:
    out = _cli("--json")
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["days"][0]["partial"] is False


LEAN_DAY = "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140506.csv"


def test_without_any_complete_session_the_most_covered_one_is_the_default() -> None:
    """Two partial sessions, the earlier spanned for 5 h, the later (the last) for 1 h: the
    default is the earlier one (the last one was the stub it used to pick)."""
    sample = load_sample()
    a, b = sample.sessions[-2:]
    t = sample.ticks
    lo_a = t.index_at(a.open_ns, side="left")
    hi_a = t.index_at(a.open_ns + 5 * NS_PER_H, side="left")
    lo_b = t.index_at(b.open_ns, side="left")
    hi_b = t.index_at(b.open_ns + 1 * NS_PER_H, side="left")
    keep = np.r_[lo_a:hi_a, lo_b:hi_b]
    ticks = Ticks.from_arrays(t.ts[keep], t.bid[keep], t.ask[keep], t.last[keep], t.size[keep])
    data = MarketData(sample.symbol, sample.tick_size, ticks, (a, b))
    assert [coverage(data, s).complete for s in data.sessions] == [False, False]
    assert default_session_index(data) == 0
    result = run_session(data, BaselineAgent())
    assert [d.date for d in result.days] == [a.date.isoformat()] and result.days[0].partial
    both = run_session(data, BaselineAgent(), days=2)  # --days 2 still takes both sessions
    assert [d.date for d in both.days] == [a.date.isoformat(), b.date.isoformat()]


def test_a_one_utc_day_fx_file_defaults_to_its_21_hour_session(shared_data: Path) -> None:
    path = shared_data / LEAN_DAY
    if not path.is_file():
        pytest.skip(f"{LEAN_DAY} not present")
    data = load(path).data
    cover = [coverage(data, s) for s in data.sessions]
    assert [(c.date, c.complete) for c in cover] == [("2014-05-05", False), ("2014-05-06", False)]
    assert cover[0].ticks == 42_584 and cover[1].ticks == 2_280
    assert [d.date for d in run_session(data, BaselineAgent()).days] == ["2014-05-05"]
    out = _cli("--data", str(path), "--json", "--backend", "direct")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["dates"] == ["2014-05-05"]
    (warning,) = [ln for ln in out.stderr.splitlines() if "warning" in ln]
    assert warning.startswith("kestrel simulate: warning: partial session 2014-05-05: ")
    assert warning.endswith("(no session in the data is complete: the default is the most covered one; "
                            "choose with --date)")
