"""The options of a universe session: blind mode, the CLOSE cadence, news and the arm latency.

- blind: every briefing of a blind run (its kernel panes, the default view and every pane asked
  for) holds no real symbol, name, date, year or price level; a reply over aliases (`ON SYM2`,
  `STANDDOWN ON SYM1`, `SYM1.last > 90`, `BUY $1000`) is armed with the real symbols and the
  real prices worked out by hand from the raw file's first prices; the capture replays;
- CLOSE: a buy decided at the CLOSE of day D fires at D+1's open and fills at D+1's next tick
  (read from the raw file: a daily bar's second tick is its low when it closed up, else its
  high); the last CLOSE is recorded, not applied; a daily universe carries by default;
- news: the news pane of a universe run never shows an item at or after the cutoff;
- arm latency: the turn takes effect the latency after its ordinal, and replays so.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import ClassVar

import msgspec
import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.data.names import names_of
from kestrel.data.universe import load_universe
from kestrel.engine.ledger import Armed, Filled, Fired
from kestrel.lang import ast
from kestrel.market.news import NewsFeed, NewsItem
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.ticks import NS_PER_S
from kestrel.market.universe import Universe
from kestrel.session.options import SessionError, SessionOptions
from kestrel.session.portfolio import NOT_APPLIED, PortfolioCapture, replay, run_portfolio
from kestrel.session.blind import blind_of, turn_from_blind
from kestrel.session.ports import interpret_module
from kestrel.session.protocol import AgentReply, AuthorRequest, ModuleReply

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
CAPITAL = PortfolioBounds(capital=100_000.0)


class Scripted:
    """Iterative: answers each ask with the next text of its script (then PASS); keeps every
    briefing it was sent."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, *texts: str, repeat: bool = False) -> None:
        self.script, self.texts, self.repeat = list(texts), list(texts), repeat
        self.briefings: list[str] = []
        self.requests: list[AuthorRequest] = []

    @property
    def agent_id(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        self.briefings.append(request.briefing)
        self.requests.append(request)
        if not self.texts and self.repeat:
            self.texts = list(self.script)
        return AgentReply(self.texts.pop(0) if self.texts else "PASS")


def _universe(shared_data: Path) -> Universe:
    return load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "MSFT"]).universe


def _raw(shared_data: Path, symbol: str) -> dict[str, tuple[float, float, float, float]]:
    t = pq.read_table(shared_data / STOCKBENCH).to_pandas()
    rows = t[t.symbol == symbol].sort_values("date")
    return {str(r.date)[:10]: (float(r.open), float(r.high), float(r.low), float(r.close))
            for r in rows.itertuples()}


# ------------------------------------------------------------------------------------------
# blind


def _real_volumes(shared_data: Path, u: Universe) -> np.ndarray:
    """Every volume a real briefing of `u` could show (sorted): a day's volume, the part of it
    traded by each of its five ticks (a daily bar fills in five equal ticks), and every mean over
    up to 20 sessions (the average volume), of each symbol; all well above the briefing's other
    numbers."""
    t = pq.read_table(shared_data / STOCKBENCH).to_pandas()
    out: list[float] = []
    for sym in u.symbols:
        daily = t[t.symbol == sym].sort_values("date")["volume"].to_numpy(dtype=float)
        out += [v * k / 5 for v in daily for k in range(1, 6)]
        for n in range(1, 21):
            out += list(np.convolve(daily, np.ones(n) / n, mode="valid"))
    return np.array(sorted(v for v in out if v > 10_000))


_DAY_OF_MONTH = re.compile(  # a day of the month beside a month (masked or not), or an ordinal day
    r"(?<![\d:])\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:\[date\]|(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b)"
    r"|\[date\]\s+\d{1,2}\b|\b\d{1,2}(?:st|nd|rd|th)\b")


def _no_real_volume(text: str, volumes: np.ndarray) -> None:
    for m in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text):
        x = float(m)
        i = int(np.searchsorted(volumes, x))
        assert not any(abs(volumes[j] - x) <= 0.5 for j in (i - 1, i) if 0 <= j < len(volumes)), (m, text)


def _scanner(shared_data: Path, u: Universe) -> object:
    raw = {s: _raw(shared_data, s) for s in u.symbols}
    ranges = [(min(v[2] for v in r.values()) * 0.97, max(v[1] for v in r.values()) * 1.03) for r in raw.values()]
    dates: set[str] = set()
    for s in u.sessions:
        d = s.date
        dates |= {d.isoformat(), f"{d.month:02d}-{d.day:02d}", d.strftime("%b %d")}  # how the panes print dates
    years = {str(s.date.year) for s in u.sessions}
    names = [n.lower() for s in u.symbols for n in names_of(s)]
    volumes = _real_volumes(shared_data, u)

    def scan(text: str) -> None:
        _no_real_volume(text, volumes)
        assert not _DAY_OF_MONTH.search(text), text
        words = {w.upper() for w in re.findall(r"[A-Za-z0-9_]+", text)}
        assert not words & set(u.symbols), text
        low = text.lower()
        assert not any(n in low for n in names), text
        for d in dates:
            assert not re.search(rf"(?<![\d/-]){re.escape(d)}(?![\d/])", text), (d, text)
        assert not re.search(r"(?<!\d)(?:" + "|".join(years) + r")(?!\d)", text), text
        for m in re.findall(r"(?<![\w.])\d+\.\d+", text):
            assert not any(lo <= float(m) <= hi for lo, hi in ranges), (m, text)

    return scan


VIEW_ALL = ("VIEW all: watchlist, portfolio(20), events(20, all), news(20, all, 60), quote(SYM1), bars(SYM1, 1d, 20), "
            "levels(SYM2), stats(SYM2), tape(SYM1, 10), position(SYM2), plan(SYM1)")
MODULE = "PLAN a ON SYM1\nWHEN pos == 0: BUY 10%EQ MKT STOP -3%\nPLAN b ON SYM2\nWHEN pos == 0: BUY $1000 MKT"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["open", "close"]), st.integers(1, 3), st.sampled_from([dt.date(2025, 2, 14), dt.date(2025, 7, 31)]))
def test_nothing_real_in_any_briefing_of_a_blind_universe_run(shared_data: Path, cadence: str, days: int,
                                                              end: dt.date) -> None:
    u = _universe(shared_data)
    news = load_news_feed(shared_data)
    agent = Scripted(VIEW_ALL, MODULE, repeat=True)
    r = run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True, cadence=cadence, news=news),  # type: ignore[arg-type]
                      date=end, days=days)
    scan = _scanner(shared_data, u)
    volumes = _real_volumes(shared_data, u)
    assert len(agent.briefings) == 2 * days and any("NEWS all" in b for b in agent.briefings)
    for text in agent.briefings:
        assert "WATCHLIST 2" in text and "SYM1" in text and "SYM2" in text
        scan(text)  # type: ignore[operator]
    for request in agent.requests:  # the typed universe beside each briefing
        doc = msgspec.to_builtins(request.universe)
        _no_real_volume(json.dumps(doc), volumes)
        for member in doc["members"]:
            if member["quote"]:
                member["quote"].pop("size", None)  # volumes are rescaled, not prices: the price scan skips them
                member["quote"].pop("volume", None)
        scan(json.dumps(doc))  # type: ignore[operator]
    assert {s for s, e in r.ledger.entries if isinstance(e, Armed)} <= {"AAPL", "MSFT"}
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()), news)
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()


def load_news_feed(shared_data: Path) -> NewsFeed:
    from kestrel.data.news import load_news

    return load_news(shared_data / "news" / "stockbench_dow20_news_20241231_20250730.jsonl").feed


def test_a_reply_over_aliases_is_armed_with_real_symbols_and_prices(shared_data: Path) -> None:
    u = _universe(shared_data)
    raw_a, raw_m = _raw(shared_data, "AAPL"), _raw(shared_data, "MSFT")
    first = u.sessions[0].date.isoformat()
    p0_a, p0_m = raw_a[first][0], raw_m[first][0]  # each symbol's first price: its blind 100
    sym_a, sym_m = blind_of(u).alias("AAPL"), blind_of(u).alias("MSFT")
    text = (f"PLAN m ON {sym_m}\nWHEN {sym_a}.last > 90 AND last > 50: BUY $1000 LMT 120 STOP @80\n"
            f"STANDDOWN ON {sym_a}")
    agent = Scripted(text)
    r = run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True), date=dt.date(2025, 3, 3))
    armed = [(s, e) for s, e in r.ledger.entries if isinstance(e, Armed)]
    assert [s for s, _ in armed] == ["MSFT"]
    read = interpret_module(text, (sym_a, sym_m))
    assert isinstance(read, ModuleReply)
    turn = turn_from_blind(blind_of(u), read.turn)  # what the session armed
    assert turn.stand_down == ("AAPL",)
    plan = turn.plans[0]
    assert plan.instrument == "MSFT"
    cond, order = plan.rules[0].cond, plan.rules[0].actions[0]
    tick_a, tick_m = u["AAPL"].data.tick_size, u["MSFT"].data.tick_size

    def real(x: float, p0: float, unit: float) -> float:  # by hand: x * p0 / 100 on the real grid
        return round(round(x * p0 / 100 / unit) * unit, 6)

    assert isinstance(cond, ast.And) and isinstance(order, ast.Order)
    first_cmp, own_cmp = cond.operands
    assert isinstance(first_cmp, ast.Compare) and isinstance(own_cmp, ast.Compare)
    assert isinstance(first_cmp.left, ast.SymbolRead) and first_cmp.left.symbol == "AAPL"
    assert isinstance(first_cmp.right, ast.Number) and isinstance(own_cmp.right, ast.Number)
    assert first_cmp.right.value == pytest.approx(real(90, p0_a, tick_a))  # on AAPL's scale, not MSFT's
    assert own_cmp.right.value == pytest.approx(real(50, p0_m, tick_m))
    assert isinstance(order.price, ast.Number) and order.stop is not None and order.size is not None
    assert order.price.value == pytest.approx(real(120, p0_m, tick_m))
    assert order.stop.value == pytest.approx(real(80, p0_m, tick_m))
    assert order.size.value == pytest.approx(real(1000, p0_m, 0.01))  # money: on the cent
    captured = r.capture.turns[0]
    assert "AAPL stood down" in captured.applied and "armed m on MSFT" in captured.applied
    assert captured.text.startswith(f"PLAN m ON {sym_m}")  # the capture keeps what the agent wrote


def test_a_real_symbol_in_a_blind_reply_is_repaired_with_the_aliases(shared_data: Path) -> None:
    u = _universe(shared_data)
    agent = Scripted("PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT", "PASS")
    run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True), date=dt.date(2025, 3, 3))
    assert len(agent.requests) == 2
    assert agent.requests[1].repair_error == "plan a is ON AAPL: no symbol AAPL in this session (its symbols are SYM1, SYM2)"


# ------------------------------------------------------------------------------------------
# the CLOSE cadence


def test_a_buy_at_the_close_fills_from_the_next_open(shared_data: Path) -> None:
    u = _universe(shared_data)
    raw = _raw(shared_data, "MSFT")
    agent = Scripted("PLAN b ON MSFT\nWHEN pos == 0: BUY 7 MKT", repeat=True)
    r = run_portfolio(u, agent, CAPITAL, SessionOptions(cadence="close"), date=dt.date(2025, 7, 31), days=3)
    assert [(t.date, t.ordinal) for t in r.turns] == [("2025-07-29", "CLOSE"), ("2025-07-30", "CLOSE"),
                                                      ("2025-07-31", "CLOSE")]
    assert r.turns[-1].applied == NOT_APPLIED and r.turns[0].applied.startswith("at the next open: armed b")
    fills = [e for s, e in r.ledger.entries if isinstance(e, Filled) and s == "MSFT"]
    fired = [e for s, e in r.ledger.entries if isinstance(e, Fired) and s == "MSFT"]
    day30 = next(s for s in u.sessions if s.date == dt.date(2025, 7, 30))
    assert fired[0].ts == day30.open_ns  # decided at the 29th's close, it reads the 30th's open tick
    o, h, lo, c = raw["2025-07-30"]
    assert len(fills) == 1 and fills[0].qty == 7  # held (daily bars carry), so no second buy
    assert fills[0].price == o  # the broker's next tick: the bar's second, the open again
    assert fills[0].ts > day30.open_ns
    assert r.engine.state().holdings[1].position == 7
    briefing = agent.briefings[0]
    assert "CLOSE" in briefing
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()


def test_the_close_sees_the_whole_bar_and_no_checkpoint(shared_data: Path) -> None:
    u = _universe(shared_data)
    agent = Scripted("VIEW q: quote(MSFT)", "PASS")
    run_portfolio(u, agent, CAPITAL, SessionOptions(cadence="close"), date=dt.date(2025, 7, 30))
    close = _raw(shared_data, "MSFT")["2025-07-30"][3]
    assert f"{close:.2f}" in agent.briefings[1]
    with pytest.raises(SessionError, match="one ordinal per session"):
        SessionOptions(cadence="close", checkpoints=("11:00",))


def test_a_daily_universe_carries_unless_told(shared_data: Path) -> None:
    u = _universe(shared_data)
    text = "PLAN b ON MSFT\nWHEN pos == 0: BUY 3 MKT"
    held = run_portfolio(u, Scripted(text), CAPITAL, date=dt.date(2025, 7, 31), days=2)
    flat = run_portfolio(u, Scripted(text), CAPITAL, SessionOptions(universe_end_of_day="flatten"),
                         date=dt.date(2025, 7, 31), days=2)
    assert held.engine.state().holdings[1].position == 3 and flat.engine.state().holdings[1].position == 0


# ------------------------------------------------------------------------------------------
# news and the arm latency


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2), st.sampled_from(["open", "close"]), st.sampled_from([0, 300]))
def test_no_news_item_at_or_after_the_cutoff_shows(shared_data: Path, k: int, cadence: str, guard: int) -> None:
    u = _universe(shared_data)
    session = u.sessions[-3 + k]
    # a daily session's OPEN cutoff is before the opening print even without a guard
    cut = session.close_ns if cadence == "close" else session.open_ns - max(guard * NS_PER_S, 1)
    items = [NewsItem(cut - 1, ("MSFT",), "Wire", "BEFORE headline"),
             NewsItem(cut, ("MSFT",), "Wire", "AT headline"),
             NewsItem(cut + 1, ("AAPL",), "Wire", "AFTER headline")]
    agent = Scripted("VIEW n: news(20, all, 60)", "PASS")
    run_portfolio(u, agent, CAPITAL, SessionOptions(cadence=cadence, guard_s=guard, news=NewsFeed.of(items)),  # type: ignore[arg-type]
                  date=session.date)
    assert "BEFORE headline" in agent.briefings[1]
    assert "AT headline" not in agent.briefings[1] and "AFTER headline" not in agent.briefings[1]
    one = Scripted("VIEW n: news(20, AAPL, 60)", "PASS")  # one symbol's items only
    run_portfolio(u, one, CAPITAL, SessionOptions(cadence=cadence, guard_s=guard,  # type: ignore[arg-type]
                                                  news=NewsFeed.of([*items, NewsItem(cut - 2, ("AAPL",), "Wire", "APPLE ONLY")])),
                  date=session.date)
    assert "APPLE ONLY" in one.briefings[1] and "BEFORE headline" not in one.briefings[1]


def test_the_arm_latency_delays_the_turn_and_replays(shared_data: Path) -> None:
    u = _universe(shared_data)
    text = "PLAN b ON MSFT\nWHEN pos == 0: BUY 2 MKT"
    r = run_portfolio(u, Scripted(text), CAPITAL, SessionOptions(arm_latency=5400.0, universe_end_of_day="flatten"),
                      date=dt.date(2025, 7, 30))
    session = u.sessions[-2]
    armed = [e for s, e in r.ledger.entries if isinstance(e, Armed) and s == "MSFT"]
    assert armed[0].ts == session.open_ns + 5400 * NS_PER_S and r.turns[0].arm_delay_ns == 5400 * NS_PER_S
    fills = [e for s, e in r.ledger.entries if isinstance(e, Filled)]
    assert fills[0].ts > armed[0].ts
    again = replay(u, PortfolioCapture.from_json(r.capture.to_json()))
    assert again.ledger.to_jsonl() == r.ledger.to_jsonl()
    plain = run_portfolio(u, Scripted(text), CAPITAL, SessionOptions(universe_end_of_day="flatten"),
                          date=dt.date(2025, 7, 30))
    assert b'"arm_latency"' not in plain.capture.to_json()  # off by default: nothing recorded
    assert [e.ts for s, e in plain.ledger.entries if isinstance(e, Armed)] == [session.open_ns]


def test_a_notice_names_its_symbol(shared_data: Path) -> None:
    u = _universe(shared_data)
    agent = Scripted("PLAN b ON MSFT\nWHEN pos == 0: BUY 200 MKT", "PASS")
    run_portfolio(u, agent, CAPITAL, SessionOptions(universe_end_of_day="flatten"), date=dt.date(2025, 7, 31), days=2)
    second = agent.briefings[-1]
    assert re.search(r"rejected b ON MSFT rule 1: cannot fund", second), second  # 200 x 515.95 > the cash


def test_blind_mode_refuses_a_custom_briefing(shared_data: Path) -> None:
    from kestrel.session.portfolio import account_briefing

    with pytest.raises(SessionError, match="blind mode uses the frame's briefing"):
        run_portfolio(_universe(shared_data), Scripted("PASS"), CAPITAL, SessionOptions(blind=True),
                      briefing=account_briefing)


def test_blind_state_is_one_mapping_per_run(shared_data: Path) -> None:
    u = _universe(shared_data)
    agent = Scripted("PASS", "PASS", "PASS")
    run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True), date=dt.date(2025, 7, 31), days=3)
    numbers = [re.search(r"session (d\d+) ", b) for b in agent.briefings]
    assert all(numbers), agent.briefings[0][:200]
    assert len({m.group(1) for m in numbers if m}) == 3  # one session number a day, never a date


def test_a_blind_bound_check_names_the_alias_and_no_real_price(shared_data: Path) -> None:
    u = _universe(shared_data)
    sym_m = blind_of(u).alias("MSFT")
    agent = Scripted(f"PLAN b ON {sym_m}\nWHEN pos == 0: BUY 100000 LMT 101.5", "PASS")
    r = run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True), date=dt.date(2025, 7, 31))
    err = agent.requests[1].repair_error
    assert err is not None and err.startswith(f"bound check: plan b ON {sym_m}: rule 1 (BUY 100000)"), err
    assert "MSFT" not in err and not re.search(r"\d+\.\d+", err), err
    assert "ON MSFT" in (r.evidence[0].error or "")  # the operator's evidence keeps the real words


class SingleShot(Scripted):
    """A scripted agent with no loop: an invalid reply stands the ordinal down."""

    iterative: ClassVar[bool] = False


def test_a_single_shot_blind_reply_on_a_real_symbol_stands_down_saying_why(shared_data: Path) -> None:
    u = _universe(shared_data)
    agent = SingleShot("PLAN a ON AAPL\nWHEN pos == 0: BUY 1 MKT")
    r = run_portfolio(u, agent, CAPITAL, SessionOptions(blind=True), date=dt.date(2025, 3, 3))
    reasons = [t.applied for t in r.capture.turns]
    want = "plan a is ON AAPL: no symbol AAPL in this session (its symbols are SYM1, SYM2)"
    assert any(want in a for a in reasons), reasons
    assert not any("only PLAN, STANDDOWN or PASS" in a for a in reasons), reasons
    assert not any("MSFT" in a for a in reasons), reasons  # the reason reveals no mapping
    assert not {s for s, e in r.ledger.entries if isinstance(e, Armed)}
