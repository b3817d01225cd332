"""The text report and `--json` tell the truth about disarms, rejections,
round-trip exits, fill times and the marked drawdown."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from shared_paths import SHARED_DATA
from kestrel.cli import main
from kestrel.data import load, load_sample

FX = SHARED_DATA / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140506.csv"


def _plan(tmp_path: Path, text: str) -> str:
    p = tmp_path / "plan.kes"
    p.write_text(text)
    return f"fixed:{p}"


def _sim(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["simulate", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


MAXLOSS = "PLAN s RISK maxloss 150\nWHEN time >= 10:00: SELL 200 MKT\n"
MAXPOS = "PLAN r RISK maxpos 100\nWHEN time >= 10:00: BUY 100 MKT\nWHEN time >= 10:01: BUY 100 MKT\n"


def test_a_maxloss_disarm_is_reported_with_its_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    agent = _plan(tmp_path, MAXLOSS)
    doc = json.loads(_sim(capsys, "--agent", agent, "--json"))
    day = doc["days"][0]
    assert any(d["reason"] == "maxloss 150 breached" and d["plan"] == "s" for d in day["disarms"])
    assert "maxloss 150 breached" in day["turns"][0]["fate"]
    assert [t["exit_reason"] for t in day["round_trips"]] == ["maxloss"]
    text = _sim(capsys, "--agent", agent)
    assert "maxloss 150 breached" in text
    turn_rows = [line for line in text.splitlines() if "PLAN s" in line and "│" in line]
    assert turn_rows and all("disarmed" in r for r in turn_rows)


def test_rejected_orders_are_reported_with_their_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    agent = _plan(tmp_path, MAXPOS)
    doc = json.loads(_sim(capsys, "--agent", agent, "--json"))
    day = doc["days"][0]
    assert [r["reason"] for r in day["rejections"]] == ["maxpos 100: position would reach 200"]
    assert day["rejections"][0]["rule"] == 2  # the plan's second rule: numbered from 1, as written
    assert not any("maxpos" in d["reason"] for d in day["disarms"])  # a rejection keeps the plan armed
    text = _sim(capsys, "--agent", agent)
    assert "maxpos 100: position would reach 200" in text
    assert "Rejections and disarms" in text and "rejected (rule 2)" in text


def test_round_trips_show_their_exit_reasons(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = json.loads(_sim(capsys, "--json"))  # the baseline agent on the sample: two stops
    assert [t["exit_reason"] for t in doc["days"][0]["round_trips"]] == ["STOP", "STOP"]
    doc = json.loads(_sim(capsys, "--agent", _plan(tmp_path, "PLAN h\nWHEN time >= 10:00: BUY 10 MKT\n"), "--json"))
    assert [t["exit_reason"] for t in doc["days"][0]["round_trips"]] == ["end of day"]
    text = _sim(capsys, "--agent", _plan(tmp_path, "PLAN h\nWHEN time >= 10:00: BUY 10 MKT\n"))
    assert "Round trips" in text and "end of day" in text


def test_fill_times_carry_the_session_zone_and_calendar_date(capsys: pytest.CaptureFixture[str]) -> None:
    if not FX.exists():
        pytest.skip("shared data not present")
    from kestrel.agents.scripted import ScriptedAgent
    from kestrel.report.summary import report, summary
    from kestrel.session import SessionOptions, run_session

    data = load(str(FX)).data
    agent = ScriptedAgent(["PASS", "PLAN x\nWHEN time >= 00:00: BUY 1000 MKT"])
    result = run_session(data, agent, SessionOptions(checkpoints=("02:05",)), date=dt.date(2014, 5, 5))
    doc = summary(result, data)
    fills = doc["days"][0]["fill_log"]
    # the session of 2014-05-05 (17:00 to 17:00 New York): the plan takes effect at the 02:05
    # ordinal, so the buy is at 02:05:07 on the 6th
    assert fills[0]["time"].startswith("2014-05-06 02:05:07 EDT")
    assert doc["days"][0]["date"] == "2014-05-05"
    report(result, data)
    out = capsys.readouterr().out
    assert "2014-05-06 02:05:07 EDT" in out
    assert not any(" 02:05:07 " in line and "2014-05-06" not in line for line in out.splitlines())


def test_max_drawdown_is_marked_at_every_tick(capsys: pytest.CaptureFixture[str]) -> None:
    # the ORB example: a short that runs against the position, then wins; the ledger's marks
    # (fills and the close) see a drawdown of 1.0
    doc = json.loads(_sim(capsys, "--agent", "fixed:examples/orb_breakout.kes", "--json"))
    day = doc["days"][0]
    fills = day["fill_log"]
    data = load_sample()
    s = data.sessions[-1]
    t = data.ticks
    # an independent per-tick marking: short 100 from the first fill to the second, then flat
    entry, exit_ = fills[0], fills[1]
    assert (entry["side"], exit_["side"], len(fills)) == ("sell", "buy", 2)
    against = peak = worst = 0.0
    for ts, ask in zip(t.ts.tolist(), t.ask.tolist()):
        if not s.open_ns <= ts <= s.close_ns or ts < entry["ts"]:
            continue
        equity = 100 * (entry["price"] - ask) if ts < exit_["ts"] else exit_["realized"]
        against = max(against, -equity)
        peak = max(peak, equity)
        worst = max(worst, peak - equity)
    assert round(against, 2) == 23.0  # the adverse run the ledger's marks miss
    assert worst > 1.0
    assert day["max_drawdown"] == pytest.approx(worst, abs=1e-6)
    assert day["max_drawdown_at"].endswith("EDT")
    text = _sim(capsys, "--agent", "fixed:examples/orb_breakout.kes")
    assert f"{worst:.2f}" in text
