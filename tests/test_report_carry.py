"""Reports of runs that carry a position overnight (`end_of_day = "carry"`): the carried
position's unrealized PnL is counted once (equity continuous across days, marked on day 2 from
the carried average), the run's net, Sharpe and drawdown agree with the ledger's totals, and
the carried round trip is marked as such with its real entry time.

The 2-day case is computed by hand; the real-run case checks the report against the engine's
own marks and summaries."""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from pathlib import Path

import pytest

from kestrel.agents import FixedAgent
from kestrel.cli import main
from kestrel.data import load_sample
from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Carried, Filled, Ledger, LedgerEvent, Mark, OrderPlaced, PositionChanged
from kestrel.market.data import MarketData
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.report import from_ledger, from_result, local_time
from kestrel.session import SessionOptions, run_session
from kestrel.session.capture import CaptureHeader

MIN = 60 * 10**9
D1, D2 = SessionSpec.us_equity(dt.date(2024, 1, 2)), SessionSpec.us_equity(dt.date(2024, 1, 3))
BID1 = [100.0, 101.0, 102.0, 103.0]
BID2 = [104.0, 100.0, 99.0, 105.0]


def _data() -> MarketData:
    ts = [D1.open_ns + k * MIN for k in range(4)] + [D2.open_ns + k * MIN for k in range(4)]
    bid = BID1 + BID2
    return MarketData("CAR", 0.01, Ticks.from_arrays(ts, bid, [b + 0.1 for b in bid]), (D1, D2))


def _fill(day: SessionSpec, k: int, oid: int, role: str, side: str, price: float, pos: int,
          avg: float | None, rpnl: float) -> list[LedgerEvent]:
    t = day.open_ns + k * MIN
    return [OrderPlaced(k, t, oid, "c", role, side, 10, "mkt", None, None),  # type: ignore[arg-type]
            Filled(k, t, oid, side, 10, price, 1.0),  # type: ignore[arg-type]
            PositionChanged(k, t, pos, avg, rpnl)]


# day 1: buy 10 at 101.10 (fee 1), held over the close; day 2 opens with it carried at its
# average 101.10, and a FLAT sells it at 99.00 (fee 1): realized 10 x (99.00 - 101.10) = -21
DAY1 = _fill(D1, 1, 1, "entry", "buy", 101.1, 10, 101.1, 0.0)
DAY2 = [Carried(0, D2.open_ns, 10, 101.1, 0), *_fill(D2, 2, 1, "flat", "sell", 99.0, 0, None, -21.0)]


def _report() -> object:
    header = CaptureHeader(data="car", symbol="CAR", dates=(D1.date.isoformat(), D2.date.isoformat()),
                           schedule=("OPEN",), guard_s=300, agent="fixed:c",
                           engine=EngineConfig(end_of_day="carry"))
    return from_ledger(header, [], Ledger(DAY1 + DAY2), _data())


def test_a_carried_position_is_marked_once_and_the_run_agrees_with_the_ledger() -> None:
    rep = _report()
    # by hand, equity = realized - fees + 10 x (bid - 101.10), day 2 marked from the carried
    # average on top of day 1's realized net (-1, its fee), never on top of day 1's marked equity
    assert rep.curve.equity.tolist() == [0.0, -2.0, 8.0, 18.0, 28.0, -12.0, -23.0, -23.0]  # type: ignore[attr-defined]
    m = rep.metrics  # type: ignore[attr-defined]
    ledger_net = Ledger(DAY1).summary().net_pnl + Ledger(DAY2).summary().net_pnl
    assert ledger_net == -23.0
    assert m.net_pnl == -23.0
    assert (m.max_drawdown, m.max_drawdown_ts) == (51.0, D2.open_ns + 2 * MIN)  # peak 28 to trough -23
    # Sharpe on the per-minute series, built by hand: each minute's end takes the last tick at
    # or before it; 390 minutes a session
    minutes = [-2.0, 8.0] + [18.0] * 388 + [-12.0] + [-23.0] * 389
    r = [(b - a) / 1000.0 for a, b in zip([0.0] + minutes, minutes)]
    want = statistics.fmean(r) / statistics.stdev(r) * math.sqrt(252 * 390)
    assert m.sharpe == pytest.approx(want, rel=1e-5)


def test_the_carried_round_trip_keeps_its_entry_and_is_marked_carried() -> None:
    rep = _report()
    (day1,) = rep.days[0].facts.trips  # type: ignore[attr-defined]
    (day2,) = rep.days[1].facts.trips  # type: ignore[attr-defined]
    entry = D1.open_ns + MIN
    assert (day1.exit_reason, day1.carried, day1.entry_ts, day1.exit_ts) == ("carried", True, entry, None)
    assert (day1.pnl, day1.fees) == (-1.0, 1.0)  # realized so far, net of the entry fee
    assert (day2.exit_reason, day2.carried, day2.entry_ts, day2.entry_price) == ("FLAT", True, entry, 101.1)
    # the whole trip: 10 x (99.00 - 101.10) less both fees
    assert (day2.pnl, day2.fees, day2.exit_price) == (-23.0, 2.0, 99.0)
    m = rep.metrics  # type: ignore[attr-defined]
    assert (m.trades, m.wins, m.losses, m.avg_loss) == (1, 0, 1, -23.0)


PLAN = "PLAN br\nWHEN pos == 0: BUY 100 MKT STOP -1.5% TARGET +3%\n"


def test_a_real_carry_run_reports_the_engine_s_equity() -> None:
    data = load_sample()
    res = run_session(data, FixedAgent(PLAN), SessionOptions(engine=EngineConfig(end_of_day="carry")), days=2)
    rep = from_result(res, data)
    d1, d2 = res.days
    assert d1.summary.carried_out == 100 and d2.summary.carried_in == 100
    last = [e for e in d2.ledger.events if isinstance(e, Mark)][-1]
    # the run's final equity: day 1's realized net, then day 2's engine equity (which marks the
    # carried position from its average)
    assert rep.metrics.net_pnl == pytest.approx(d1.summary.net_pnl + last.equity, abs=1e-9)
    assert rep.curve.final == rep.metrics.net_pnl
    # every engine mark of day 2 appears in the chained curve, offset by day 1's realized net
    n1 = len(rep.days[0].curve)
    for e in (e for e in d2.ledger.events if isinstance(e, Mark)):
        assert rep.curve.equity[n1 + e.tick] == pytest.approx(d1.summary.net_pnl + e.equity, abs=1e-9)


def test_the_text_report_and_json_mark_carried_positions(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    plan = tmp_path / "br.kes"
    plan.write_text(PLAN)
    argv = ["simulate", "--agent", f"fixed:{plan}", "--days", "2", "--end-of-day", "carry"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    day1, day2 = doc["days"]
    assert [(t["exit_reason"], t["carried"]) for t in day1["round_trips"]] == [("carried", True)]
    first = day2["round_trips"][0]
    assert first["carried"] is True and first["entry"] == day1["round_trips"][0]["entry"]
    assert first["entry"].startswith(day1["date"])
    assert not any(t["exit_reason"] == "open" for t in day1["round_trips"])
    net = doc["metrics"]["net_pnl"]
    data = load_sample()
    res = run_session(data, FixedAgent(PLAN), SessionOptions(engine=EngineConfig(end_of_day="carry")), days=2)
    last = [e for e in res.days[1].ledger.events if isinstance(e, Mark)][-1]
    assert net == pytest.approx(res.days[0].summary.net_pnl + last.equity, abs=1e-9)
    assert main(argv) == 0
    text = capsys.readouterr().out
    pnl_rows = [x for x in text.splitlines() if x.startswith("│ 20")]
    d1_rows = [x for x in pnl_rows if x.startswith(f"│ {day1['date']}") and "carried" in x]
    d2_rows = [x for x in pnl_rows if x.startswith(f"│ {day2['date']}") and "carried" in x]
    assert d1_rows and d2_rows
    # the round trip of day 2 that came in carried shows its day-1 entry date
    trips = text[text.index("Round trips"):text.index("Rejections and disarms")]
    rows = [[c.strip() for c in x.split("│")[1:-1]] for x in trips.splitlines() if x.startswith("│ 20")]
    assert [(r[0], r[3].split()[0], r[-2], r[-1]) for r in rows] == [
        (day1["date"], day1["date"], "carried", "out"),  # date, entry date, exit reason, carried
        (day2["date"], day1["date"], "TARGET", "in"),
        (day2["date"], day2["date"], "carried", "out")]


def test_the_report_of_a_carry_capture_replays_it_under_its_execution_model(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "br.kes"
    plan.write_text(PLAN)
    a, b, cap, led = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    assert main(["simulate", "--agent", f"fixed:{plan}", "--days", "2", "--end-of-day", "carry",
                 "--fee-per-order", "1.5", "--capture", str(cap), "--ledger", str(led), "--report", str(a),
                 "--json"]) == 0
    capsys.readouterr()
    # replayed from the capture alone: the same run (carry, fees), so the same page
    assert main(["report", "--capture", str(cap), "-o", str(b)]) == 0
    out = capsys.readouterr().out
    assert b.read_bytes() == a.read_bytes()
    html = a.read_text()
    assert ">carried<" in html and ">in<" in html and ">out<" in html
    assert "open position" not in out  # the terminal summary states the net of the report
    c = tmp_path / "c.html"
    assert main(["report", "--capture", str(cap), "--ledger", str(led), "-o", str(c)]) == 0
    capsys.readouterr()
    metrics = [h.split("<h2>Metrics")[1].split(">tokens<")[0] for h in (html, c.read_text())]
    assert metrics[0] == metrics[1]
