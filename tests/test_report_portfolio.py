"""The report of a portfolio run from hand-built ledgers in the portfolio ledger's format
(symbol-stamped events, `account`, `split`, `dividend` lines) over small hand-built universes,
every expected figure worked out by hand in the comments."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import msgspec
import numpy as np
import pytest

from html_pages import assert_offline
from kestrel.engine.ledger import Filled, OrderRejected, PositionChanged
from kestrel.market.corporate import Dividend, Split
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe
from kestrel.report.portfolio import portfolio_report, to_json
from kestrel.report.portfolio_ledger import PortfolioLedgerError, read_portfolio_ledger, stamp
from kestrel.report.portfolio_page import portfolio_text, render_portfolio

DAY1 = SessionSpec.us_equity(dt.date(2024, 1, 2))
DAY2 = SessionSpec.us_equity(dt.date(2024, 1, 3))
S = 1_000_000_000


def _member(symbol: str, ts: list[int], bid: list[float], ask: list[float], sessions: tuple[SessionSpec, ...]) -> Member:
    data = MarketData(symbol, 0.01, Ticks.from_arrays(ts, bid, ask), sessions,
                      instrument=Instrument(symbol=symbol, tick_size=0.01))
    return Member(symbol, data, data, Decimal(1))


def _line(symbol: str, event: msgspec.Struct) -> bytes:
    return stamp(symbol, msgspec.json.encode(event)) + b"\n"


def _account(tick: int, ts: int, cash: float, equity: float, gross: float, net: float, open_: int) -> bytes:
    return json.dumps({"event": "account", "tick": tick, "ts": ts, "cash": cash, "equity": equity, "gross": gross,
                       "net": net, "open": open_}).encode() + b"\n"


T0 = DAY1.open_ns
# AAA ticks at +0, +60, +120, +180 s; BBB at +0, +60, +150 s. Merged order (ts, then symbol):
# 0 AAA#0, 1 BBB#0, 2 AAA#1, 3 BBB#1, 4 AAA#2, 5 BBB#2, 6 AAA#3
AAA = _member("AAA", [T0, T0 + 60 * S, T0 + 120 * S, T0 + 180 * S], [10.00, 10.10, 10.20, 9.90],
              [10.02, 10.12, 10.22, 9.92], (DAY1,))
BBB = _member("BBB", [T0, T0 + 60 * S, T0 + 150 * S], [50.00, 49.00, 51.00], [50.05, 49.05, 51.05], (DAY1,))
TWO = Universe((AAA, BBB), (DAY1,), "XNYS")

LEDGER = b"".join([
    # AAA: buy 100 at its tick 0's ask 10.02, fee 1: cash 10000 - 1002 - 1 = 8997
    _line("AAA", Filled(0, T0, 1, "buy", 100, 10.02, 1.0)),
    _line("AAA", PositionChanged(0, T0, 100, 10.02, 0.0)),
    # merged 0: AAA 100 x bid 10.00 = 1000; equity 9997
    _account(0, T0, 8997.0, 9997.0, 1000.0, 1000.0, 1),
    # BBB: sell 20 short at its tick 1's bid 49.00, fee 0.50: cash 8997 + 980 - 0.5 = 9976.5
    _line("BBB", Filled(1, T0 + 60 * S, 2, "sell", 20, 49.00, 0.5)),
    _line("BBB", PositionChanged(1, T0 + 60 * S, -20, 49.00, 0.0)),
    # merged 3: AAA 100 x 10.10 = 1010, BBB -20 x ask 49.05 = -981: equity 9976.5 + 29 = 10005.5
    _account(3, T0 + 60 * S, 9976.5, 10005.5, 1991.0, 29.0, 2),
    _line("BBB", OrderRejected(1, T0 + 60 * S, "p", 0, "maxpos")),
    # AAA: sell 100 at its tick 2's bid 10.20, fee 1: cash 9976.5 + 1020 - 1 = 10995.5
    _line("AAA", Filled(2, T0 + 120 * S, 3, "sell", 100, 10.20, 1.0)),
    _line("AAA", PositionChanged(2, T0 + 120 * S, 0, None, 18.0)),
    # merged 4: BBB -981: equity 10014.5
    _account(4, T0 + 120 * S, 10995.5, 10014.5, 981.0, -981.0, 1),
    # merged 5 (BBB#2): BBB -20 x 51.05 = -1021: equity 9974.5; the close
    _account(6, DAY1.close_ns, 10995.5, 9974.5, 1021.0, -1021.0, 1),
])


def test_account_marked_at_every_merged_tick_with_attribution_by_hand() -> None:
    rep = portfolio_report(TWO, LEDGER, 10_000.0)
    c = rep.curve
    assert c.ts.tolist() == [T0, T0, T0 + 60 * S, T0 + 60 * S, T0 + 120 * S, T0 + 150 * S, T0 + 180 * S]
    assert c.equity.tolist() == [9997.0, 9997.0, 10007.0, 10005.5, 10014.5, 9974.5, 9974.5]
    assert c.cash.tolist() == [8997.0, 8997.0, 8997.0, 9976.5, 10995.5, 10995.5, 10995.5]
    assert c.gross.tolist() == [1000.0, 1000.0, 1010.0, 1991.0, 981.0, 1021.0, 1021.0]
    assert c.net.tolist() == [1000.0, 1000.0, 1010.0, 29.0, -981.0, -1021.0, -1021.0]
    assert c.open_positions.tolist() == [1, 1, 1, 2, 1, 1, 1]
    assert (rep.account_lines, rep.account_mismatches) == (4, 0)
    f = rep.figures
    assert (f.final_equity, f.net_pnl, f.return_on_capital) == (9974.5, -25.5, -0.00255)
    # the peak starts at the capital: 10014.5 at merged 4, the trough 9974.5 at merged 5
    assert (f.max_drawdown, f.max_drawdown_ts) == (40.0, T0 + 150 * S)
    assert f.peak_gross == 1991.0 and f.peak_gross_share == pytest.approx(1991.0 / 10005.5, abs=1e-6)
    a, b = rep.attribution
    # AAA: (10.20 - 10.02) x 100 - 2 fees = 16; BBB: +979.5 from the short sale, -1021 its value = -41.5
    assert (a.symbol, a.pnl, a.trades, a.fills, a.fees, a.final_position, a.turnover) == ("AAA", 16.0, 1, 2, 2.0, 0.0, 2022.0)
    assert (b.symbol, b.pnl, b.trades, b.fills, b.fees, b.final_position, b.final_value) == ("BBB", -41.5, 0, 1, 0.5, -20.0, -1021.0)
    assert a.pnl + b.pnl == f.net_pnl
    assert b.rejections == 1 and rep.rejections == 1
    # time held over the 6.5 h session: AAA 120 s, BBB from +60 s to the close
    assert a.time_in_market == round(120 / 23_400, 6) and b.time_in_market == round(23_340 / 23_400, 6)
    (day,) = rep.sessions
    assert (day.date, day.equity, day.pnl, day.gross, day.net, day.open_positions, day.max_drawdown) == (
        "2024-01-02", 9974.5, -25.5, 1021.0, -1021.0, 1, 40.0)


def test_a_wrong_account_line_is_counted_and_named() -> None:
    bad = LEDGER + _account(5, T0 + 150 * S, 10995.5, 9999.0, 1021.0, -1021.0, 1)
    rep = portfolio_report(TWO, bad, 10_000.0)
    assert rep.account_mismatches == 1
    assert rep.first_mismatch is not None and "equity 9999.0" in rep.first_mismatch and "equity 9974.5" in rep.first_mismatch


def test_a_split_and_a_dividend_over_two_sessions_by_hand() -> None:
    d1, d2 = DAY1.open_ns, DAY2.open_ns
    ccc = _member("CCC", [d1, d1 + 3600 * S, d2, d2 + 3600 * S], [100.0, 102.0, 51.0, 52.0],
                  [100.0, 102.0, 51.0, 52.0], (DAY1, DAY2))
    uni = Universe((ccc,), (DAY1, DAY2), "XNYS", (Split("CCC", DAY2.date, 2, 1),), (Dividend("CCC", DAY2.date, 0.5),))
    ledger = b"".join([
        _line("CCC", Filled(0, d1, 1, "buy", 10, 100.0, 0.0)),  # cash 2000 - 1000 = 1000
        _line("CCC", PositionChanged(0, d1, 10, 100.0, 0.0)),
        b'{"event":"split","symbol":"CCC","ts":%d,"ratio":2,"pos_before":10,"pos_after":20,'
        b'"avg_before":100.0,"avg_after":50.0}\n' % d2,
        b'{"event":"dividend","symbol":"CCC","ts":%d,"per_share":0.5,"pos":20,"amount":10.0}\n' % d2,
    ])
    rep = portfolio_report(uni, ledger, 2_000.0)
    # day 1: 1000 + 10 x 100, then 10 x 102; day 2 (2:1, +10 dividend): 1010 + 20 x 51, then 20 x 52
    assert rep.curve.equity.tolist() == [2000.0, 2020.0, 2030.0, 2050.0]
    assert rep.curve.cash.tolist() == [1000.0, 1000.0, 1010.0, 1010.0]
    (a,) = rep.attribution
    assert (a.pnl, a.dividends, a.final_position, a.final_value) == (50.0, 10.0, 20.0, 1040.0)
    assert [(s.date, s.equity, s.pnl) for s in rep.sessions] == [("2024-01-02", 2020.0, 20.0), ("2024-01-03", 2050.0, 30.0)]
    # the reference portfolio buys 20 at 100 on the first tick (capital 2000): 40 after the split,
    # paid 40 x 0.5 = 20 on day 2: 20 + 40 x 51, then 20 + 40 x 52
    ew = rep.references["equal-weight buy-and-hold"][1]
    assert ew.curve.equity.tolist() == [2000.0, 2040.0, 2060.0, 2100.0]
    assert rep.references["cash"][0].net_pnl == 0.0


def test_text_json_and_page_carry_the_figures() -> None:
    rep = portfolio_report(TWO, LEDGER, 10_000.0)
    doc = to_json(rep)
    assert doc["metrics"]["net_pnl"] == -25.5 and doc["metrics"]["max_drawdown"] == 40.0
    assert [r["symbol"] for r in doc["attribution"]] == ["AAA", "BBB"]
    assert doc["account_check"] == {"lines": 4, "mismatches": 0, "first_mismatch": None}
    assert set(doc["baselines"]) == {"equal-weight buy-and-hold", "cash"}
    json.dumps(doc)  # plain JSON
    text = "\n".join(portfolio_text(rep))
    assert "net PnL -25.50" in text and "max drawdown 40.00" in text
    assert "AAA" in text and "+16.00" in text and "-41.50" in text
    page = render_portfolio(rep)
    assert_offline(page)
    assert page.count("<svg") == 2 and "gross" in page and "-41.50" in page
    assert render_portfolio(rep) == page  # the same bytes


def test_bad_ledgers_are_refused_with_the_line() -> None:
    with pytest.raises(PortfolioLedgerError, match="ledger line 2"):
        read_portfolio_ledger(_line("AAA", Filled(0, T0, 1, "buy", 1, 10.02, 0.0)) + b'{"event":"nope"}\n')
    with pytest.raises(PortfolioLedgerError, match="without a symbol"):
        read_portfolio_ledger(msgspec.json.encode(Filled(0, T0, 1, "buy", 1, 10.02, 0.0)) + b"\n")
    with pytest.raises(ValueError, match="symbol 'ZZZ' is not in the universe"):
        portfolio_report(TWO, _line("ZZZ", Filled(0, T0, 1, "buy", 1, 10.02, 0.0)), 10_000.0)
    with pytest.raises(ValueError, match="AAA has no tick 9"):
        portfolio_report(TWO, _line("AAA", Filled(9, T0, 1, "buy", 1, 10.02, 0.0)), 10_000.0)


def test_the_engine_records_are_read_back_as_written_and_another_writer_s_split_leniently() -> None:
    """The report reads the engine's own account, split and dividend records; a split or a
    dividend line without what the report does not read (`tick`, a split's averages) reads
    with tick -1 and NaN averages; one without a field the report reads is refused."""
    from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, PortfolioLedger, SplitApplied

    written = PortfolioLedger()
    written.append(None, AccountMark(3, T0, 900.5, 1000.25, 99.75, 99.75, 1))
    written.append("CCC", SplitApplied(7, T0, 2.0, 10, 20, 100.0, 50.0, 0.0))
    written.append("CCC", DividendPaid(7, T0, 0.5, 20, 10.0))
    lines = read_portfolio_ledger(written.to_jsonl())
    assert [(x.symbol, x.event) for x in lines] == written.entries
    assert [type(x.event) for x in lines] == [AccountMark, SplitApplied, DividendPaid]

    other = (b'{"event":"split","symbol":"CCC","ts":5,"ratio":2,"pos_before":10,"pos_after":20}\n'
             b'{"event":"dividend","symbol":"CCC","ts":6,"per_share":0.5,"pos":20,"amount":10.0,"note":"x"}\n')
    split, dividend = read_portfolio_ledger(other)
    assert split.symbol == "CCC" and isinstance(split.event, SplitApplied)
    assert (split.event.tick, split.event.ts, split.event.ratio, split.event.pos_after, split.event.cash) == (-1, 5, 2.0, 20, 0.0)
    assert np.isnan(split.event.avg_before) and np.isnan(split.event.avg_after)
    assert isinstance(dividend.event, DividendPaid) and (dividend.event.tick, dividend.event.amount) == (-1, 10.0)
    with pytest.raises(PortfolioLedgerError, match="ledger line 1: .*pos_after"):
        read_portfolio_ledger(b'{"event":"split","symbol":"CCC","ts":5,"ratio":2,"pos_before":10}\n')
    with pytest.raises(PortfolioLedgerError, match="ledger line 1: .*tick"):
        read_portfolio_ledger(b'{"event":"account","ts":5,"cash":1,"equity":1,"gross":0,"net":0,"open":0}\n')


def test_an_empty_ledger_is_cash() -> None:
    rep = portfolio_report(TWO, b"", 10_000.0)
    assert np.all(rep.curve.equity == 10_000.0) and rep.figures.max_drawdown == 0.0
    assert all(a.pnl == 0.0 and a.trades == 0 for a in rep.attribution)


def test_cash_in_lieu_of_a_split_fraction_by_hand() -> None:
    d1, d2 = DAY1.open_ns, DAY2.open_ns
    ddd = _member("DDD", [d1, d1 + 3600 * S, d2], [100.0, 102.0, 68.0], [100.0, 102.0, 68.0], (DAY1, DAY2))
    uni = Universe((ddd,), (DAY1, DAY2), "XNYS", (Split("DDD", DAY2.date, 3, 2),))
    ledger = b"".join([
        _line("DDD", Filled(0, d1, 1, "buy", 5, 100.0, 0.0)),  # cash 2000 - 500 = 1500
        _line("DDD", PositionChanged(0, d1, 5, 100.0, 0.0)),
        # 3:2: 5 -> 7.5 shares, 7 kept, half a share paid at the last touch 102 / 1.5 = 68: +34
        b'{"symbol":"DDD","event":"split","tick":2,"ts":%d,"ratio":1.5,"pos_before":5,"pos_after":7,'
        b'"avg_before":100.0,"avg_after":71.42857142857143}\n' % d2,
    ])
    rep = portfolio_report(uni, ledger, 2_000.0)
    assert rep.curve.cash.tolist() == [1500.0, 1500.0, 1534.0]
    assert rep.curve.equity.tolist() == [2000.0, 2010.0, 2010.0]  # 1534 + 7 x 68 = 2010
    # the reference portfolio: 20 bought at 100 become 30, no fraction
    assert rep.references["equal-weight buy-and-hold"][1].curve.equity.tolist() == [2000.0, 2040.0, 2040.0]
