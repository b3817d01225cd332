"""Reports value money with the run's instrument: the contract multiplier (not a default 1),
PnL exact in `--json` and printed at the currency's precision (cents for USD, 8 decimals for ETH), the instrument named in the text report,
`--json` and the HTML; the execution line names carry; `--currency` is upper-cased.

Expected figures are computed by hand (a 6E-like synthetic session) or by an independent
per-tick marking loop in the test, never by the report code."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import dataclasses
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from kestrel.agents import BaselineAgent, FixedAgent
from kestrel.cli import main
from kestrel.data import generate, load, load_sample
from kestrel.data.synthetic import SyntheticSpec
from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Filled, Ledger, LedgerEvent, OrderPlaced, PositionChanged
from kestrel.market.instrument import Instrument
from shared_paths import SHARED_DATA
from kestrel.market.data import MarketData
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.report import from_ledger, from_result
from kestrel.report.html import render_run
from kestrel.session import SessionOptions, run_session
from kestrel.session.capture import CaptureHeader

SHARED = SHARED_DATA
E6 = SHARED / "bars_1min" / "nautilus_cme_6EH4_1min_bars_20240101_20240131.csv"
XRP = SHARED / "trades" / "freqtrade_binance_xrpeth_trades_20191011_20191013.csv"

MIN = 60 * 10**9
DAY = SessionSpec.us_equity(dt.date(2024, 1, 2))
BID = [1.1000, 1.1010, 1.0990, 1.0980, 1.1005, 1.1020]


def _six_e() -> MarketData:
    """One 6E-like session: six quotes a minute apart, spread one 0.0001, multiplier 125000."""
    ts = [DAY.open_ns + k * MIN for k in range(len(BID))]
    ticks = Ticks.from_arrays(ts, BID, [round(b + 0.0001, 5) for b in BID])
    inst = Instrument(symbol="6EH4", tick_size=0.00005, multiplier=125_000.0, currency="USD")
    return MarketData("6EH4", 0.00005, ticks, (DAY,), instrument=inst)


def _fill(k: int, oid: int, role: str, side: str, qty: int, price: float, pos: int, avg: float | None,
          rpnl: float) -> list[LedgerEvent]:
    t = DAY.open_ns + k * MIN
    return [OrderPlaced(k, t, oid, "p", role, side, qty, "mkt", None, None),  # type: ignore[arg-type]
            Filled(k, t, oid, side, qty, price, 0.0),  # type: ignore[arg-type]
            PositionChanged(k, t, pos, avg, rpnl)]


# buy 2 at the ask 1.1011 (tick 1), sell 2 at the bid 1.1005 (tick 4): -0.0006 x 2 x 125000 = -150
LEDGER = [*_fill(1, 1, "entry", "buy", 2, 1.1011, 2, 1.1011, 0.0),
          *_fill(4, 2, "flat", "sell", 2, 1.1005, 0, None, -150.0)]


def _six_e_report() -> object:
    data = _six_e()
    # a capture header whose engine config says nothing of the multiplier (1.0), as runs record it
    header = CaptureHeader(data="6e.csv", symbol="6EH4", dates=(DAY.date.isoformat(),), schedule=("OPEN",),
                           guard_s=300, agent="fixed:p", engine=EngineConfig())
    return from_ledger(header, [], Ledger(list(LEDGER)), data)


def test_a_ledger_on_a_multiplied_instrument_is_valued_at_its_multiplier() -> None:
    rep = _six_e_report()
    m = rep.metrics  # type: ignore[attr-defined]
    # equity by hand: 0, 2 x (1.1010 - 1.1011) x 125000 = -25, -525, -775 (the trough), -150, -150
    assert rep.days[0].curve.equity.tolist() == [0.0, -25.0, -525.0, -775.0, -150.0, -150.0]  # type: ignore[attr-defined]
    assert (m.net_pnl, m.max_drawdown) == (-150.0, 775.0)
    assert m.max_drawdown_ts == DAY.open_ns + 3 * MIN
    assert m.turnover == pytest.approx(2 * 1.1011 * 125_000 + 2 * 1.1005 * 125_000)  # 550400
    # buy-and-hold in the run's largest position: 2 x (last bid 1.1020 - first ask 1.1001) x 125000
    assert rep.baselines["buy-and-hold"].net_pnl == pytest.approx(475.0)  # type: ignore[attr-defined]
    assert rep.header.multiplier == 125_000.0  # type: ignore[attr-defined]
    html = render_run(rep)  # type: ignore[arg-type]
    assert "USD / 125000" in html and "USD / 1<" not in html


def _marked_drawdown(events: list[LedgerEvent], t: Ticks, multiplier: float) -> float:
    """Peak-to-trough of rpnl - fees + pos x (touch - avg) x multiplier at every tick (its own loop)."""
    by_tick: dict[int, list[LedgerEvent]] = {}
    for e in events:
        by_tick.setdefault(e.tick, []).append(e)
    pos: int | float = 0
    avg, rpnl, fees = 0.0, 0.0, 0.0
    peak = worst = 0.0
    for k in range(len(t)):
        for e in by_tick.get(k, []):
            if isinstance(e, Filled):
                fees += e.fee
            elif isinstance(e, PositionChanged):
                pos, avg, rpnl = e.pos, e.avg_price or 0.0, e.rpnl
        touch = float(t.bid[k]) if pos > 0 else float(t.ask[k])
        eq = rpnl - fees + (pos * (touch - avg) * multiplier if pos else 0.0)
        peak = max(peak, eq)
        worst = max(worst, peak - eq)
    return worst


def test_a_run_on_a_multiplied_instrument_reports_drawdown_turnover_and_baseline_at_the_multiplier() -> None:
    sample = load_sample()
    data = dataclasses.replace(sample, instrument=Instrument(symbol=sample.symbol, tick_size=sample.tick_size,
                                                             multiplier=50.0))
    opts = SessionOptions(engine=EngineConfig(maxloss=1e9))
    res = run_session(data, FixedAgent("PLAN b\nWHEN time >= 10:00: BUY 3 MKT"), opts)
    rep = from_result(res, data)
    s = data.sessions[-1]
    t = data.ticks.between(s.open_ns, s.close_ns + 1)
    events = list(res.days[0].ledger.events)
    want = _marked_drawdown(events, t, 50.0)
    assert want > 0 and rep.metrics.max_drawdown == pytest.approx(want, abs=0.005)
    fills = [e for e in events if isinstance(e, Filled)]
    assert rep.metrics.turnover == pytest.approx(sum(f.qty * f.price * 50 for f in fills))
    assert rep.baselines["buy-and-hold"].net_pnl == pytest.approx(3 * (t.bid[-1] - t.ask[0]) * 50, abs=0.01)
    assert rep.header.multiplier == 50.0


@pytest.mark.skipif(not E6.exists(), reason="shared data not present")
def test_the_6e_report_marks_each_tick_at_125000() -> None:
    data = load(str(E6)).data
    assert data.instrument.multiplier == 125_000.0
    # maxpos 1000 contracts, as the review ran it (the scaled default is one contract)
    res = run_session(data, BaselineAgent(), SessionOptions(engine=EngineConfig(maxpos=1000)))
    rep = from_result(res, data)
    s = next(x for x in data.sessions if x.date.isoformat() == res.days[0].date)
    t = data.ticks.between(s.open_ns, s.close_ns + 1)
    want = _marked_drawdown(list(res.days[0].ledger.events), t, 125_000.0)
    assert want == pytest.approx(525.0)  # the independent review's figure
    assert rep.metrics.max_drawdown == pytest.approx(want, abs=0.005)
    assert rep.metrics.turnover > 1_000_000
    assert rep.header.multiplier == 125_000.0


# ------------------------------------------------------------------------------------------
# the CLI: money quantum, instrument, execution line, currency


@pytest.fixture(scope="module")
def quotes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sessions of generated quotes as an ISO-timestamp CSV (the `oanda` layout)."""
    md = generate(SyntheticSpec(sessions=2, tick_interval_s=4.0), seed=3)
    t = md.ticks
    stamps = np.datetime_as_string(t.ts.astype("datetime64[ns]"), unit="ms").tolist()
    path = tmp_path_factory.mktemp("data") / "quotes.csv"
    path.write_text("ts_utc,bid,ask\n" + "".join(f"{s}Z,{b:.2f},{a:.2f}\n" for s, b, a in
                                                 zip(stamps, t.bid.tolist(), t.ask.tolist())))
    return path


def _sim(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["simulate", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _plan(tmp_path: Path, text: str) -> str:
    p = tmp_path / "plan.kes"
    p.write_text(text)
    return f"fixed:{p}"


def _cents(x: float) -> str:
    return f"{Decimal(repr(x)).quantize(Decimal('0.01'), rounding=ROUND_HALF_EVEN):+f}"


def test_pnl_is_exact_in_json_and_shown_in_cents(capsys: pytest.CaptureFixture[str], quotes: Path,
                                                tmp_path: Path) -> None:
    # tick 0.01 x multiplier 0.001: one tick of one unit is 0.00001, the engine's quantum; the
    # text and the HTML report print USD in cents, --json keeps the exact amount
    agent = _plan(tmp_path, "PLAN q\nWHEN time >= 10:00: BUY 7 MKT STOP -0.3% TARGET +0.3%\n")
    flags = ("--data", str(quotes), "--preset", "oanda", "--multiplier", "0.001", "--agent", agent)
    doc = json.loads(_sim(capsys, *flags, "--json"))
    day = doc["days"][0]
    net = day["net_pnl"]
    assert net != round(net, 2)  # the figure needs more than cents
    text = _sim(capsys, *flags)
    assert f"{net:+.5f}" not in text and f"net {_cents(net)}" in text
    trip = day["round_trips"][0]["pnl"]
    assert _cents(trip) in text
    html_path = tmp_path / "r.html"
    _sim(capsys, *flags, "--report", str(html_path))
    html = html_path.read_text()
    assert _cents(net) in html and f"{net:+.5f}" not in html


@pytest.mark.skipif(not XRP.exists(), reason="shared data not present")
def test_xrp_eth_pnl_keeps_its_decimals(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_sim(capsys, "--data", str(XRP), "--json"))
    net = doc["total"]["net_pnl"]
    assert net != 0
    text = _sim(capsys, "--data", str(XRP))
    assert f"{net:+.8f}" in text and "ETH" in text  # ETH prints at 8 decimals


def test_the_instrument_is_in_the_text_header_json_and_html(capsys: pytest.CaptureFixture[str], quotes: Path,
                                                            tmp_path: Path) -> None:
    flags = ("--data", str(quotes), "--preset", "oanda", "--multiplier", "50", "--currency", "JPY",
             "--symbol", "ABC")
    doc = json.loads(_sim(capsys, *flags, "--json"))
    assert doc["instrument"] == {"symbol": "ABC", "tick_size": 0.01, "multiplier": 50.0, "currency": "JPY",
                                 "min_qty": 1, "lot_size": 1.0}
    text = _sim(capsys, *flags)
    head = "\n".join(text.splitlines()[:3])
    assert "ABC" in head and "tick size 0.01" in head and "multiplier 50" in head and "JPY" in head
    assert "min qty 1" in head
    html_path = tmp_path / "r.html"
    _sim(capsys, *flags, "--report", str(html_path))
    html = html_path.read_text()
    source = html[html.index("<h2>Data source</h2>"):]
    for needle in ("ABC", "tick size 0.01", "multiplier 50", "JPY", "min qty 1"):
        assert needle in source, needle


def test_the_execution_line_names_carry(capsys: pytest.CaptureFixture[str]) -> None:
    text = _sim(capsys, "--days", "2", "--end-of-day", "carry")
    (line,) = [x for x in text.splitlines() if x.startswith("Execution:")]
    assert "end of day: carry" in line
    text = _sim(capsys)
    (line,) = [x for x in text.splitlines() if x.startswith("Execution:")]
    assert "carry" not in line


def test_the_currency_flag_is_upper_cased(capsys: pytest.CaptureFixture[str], quotes: Path) -> None:
    doc = json.loads(_sim(capsys, "--data", str(quotes), "--preset", "oanda", "--currency", " eur ", "--json"))
    assert doc["currency"] == "EUR" and doc["instrument"]["currency"] == "EUR"
    text = _sim(capsys, "--data", str(quotes), "--preset", "oanda", "--currency", "eur")
    assert "PnL (EUR)" in text and "(eur)" not in text


def test_a_report_from_a_capture_values_money_at_the_instruments_multiplier(
        capsys: pytest.CaptureFixture[str], quotes: Path, tmp_path: Path) -> None:
    agent = _plan(tmp_path, "PLAN q\nWHEN time >= 10:00: BUY 2 MKT STOP -0.3% TARGET +0.3%\n")
    a, b, cap, led = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    doc = json.loads(_sim(capsys, "--data", str(quotes), "--preset", "oanda", "--multiplier", "50",
                          "--maxloss", "100000", "--agent", agent, "--capture", str(cap), "--ledger", str(led),
                          "--report", str(a), "--json"))
    fills = doc["days"][0]["fill_log"]
    assert doc["metrics"]["turnover"] == pytest.approx(sum(f["qty"] * f["price"] * 50 for f in fills))
    assert main(["report", "--capture", str(cap), "--ledger", str(led), "-o", str(b)]) == 0
    out = capsys.readouterr().out
    assert "multiplier 50" in out
    for html in (a.read_text(), b.read_text()):
        assert "USD / 50<" in html
        turnover = html.split(">turnover<")[1].split("</tr>")[0]
        assert f"{doc['metrics']['turnover']:.2f}" in turnover
