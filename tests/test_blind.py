"""Blind mode: exact scales, plans mapped back exactly, a blind run's ledger equal to the real run's,
and a property test that renders every pane, briefing and typed snapshot under blind mode and finds
no real symbol, date, year or price level (news included)."""

from __future__ import annotations

import datetime as dt
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blind_support import BlindScan
from kestrel import lang
from kestrel.data.sample import load_sample
from kestrel.frame import DEFAULT_CATALOG, Ordinal, ResolvedPane, ResolvedView, briefing, freeze, typed_snapshot
from kestrel.frame.blind import Scale
from kestrel.lang import ast
from decimal import Decimal

from kestrel.market import AccountState
from kestrel.market.account import Notice, WorkingOrder
from kestrel.market.corporate import Dividend, Split
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.portfolio import Holding, PortfolioBounds, PortfolioState
from kestrel.market.ticks import Ticks
from kestrel.market.universe import Member, Universe
from kestrel.market.news import NewsFeed, NewsItem
from kestrel.market.ticks import NS_PER_S
from kestrel.session.blind import blind_of
from kestrel.session.protocol import AgentReply, AuthorRequest
from kestrel.session.runner import SessionOptions, run_session

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = load_sample()
BLIND = blind_of(SAMPLE)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**6), st.sampled_from(["0.01", "0.25", "0.00001", "1", "0.5"]), st.integers(1, 10**7))
def test_a_printed_blind_price_maps_back_to_the_very_price(p0_ticks: int, tick_text: str, real_ticks: int) -> None:
    tick = Fraction(tick_text)
    scale = Scale(tick, Fraction(100) / (p0_ticks * tick))
    real = float(real_ticks * tick)
    assert scale.back(float(scale.text(real))) == real
    assert scale.back(scale.value(real)) == real
    assert float(scale.text(float(p0_ticks * tick))) == 100.0


def test_every_example_plan_maps_to_blind_and_back_exactly() -> None:
    seen = 0
    for path in sorted((ROOT / "examples").glob("*.kes")):
        stmt = lang.parse(path.read_text(encoding="utf-8"))
        plans = [s for s in (stmt.statements if isinstance(stmt, ast.Module) else (stmt,)) if isinstance(s, ast.Plan)]
        for plan in plans:
            shown = BLIND.plan_to_blind(plan, SAMPLE.symbol)
            text = lang.format(shown)
            back = BLIND.plan_from_blind(lang.parse(text), SAMPLE.symbol)  # type: ignore[arg-type]
            assert back == plan, path.name
            seen += 1
    assert seen >= 20


def test_which_literals_are_prices() -> None:
    plan = lang.parse("PLAN p RISK maxloss 200\nWHEN last > 190.00 AND pnl > -50 AND last > vwap * 1.005 "
                      "AND chg(5m) > 0.5%: BUY 10 LMT bid - 0.05 STOP @185.00 TARGET +1.2% TTL 5m")
    assert isinstance(plan, ast.Plan)
    k = Fraction(100) / Fraction(repr(round(float(SAMPLE.ticks.last[0]), 2)))
    shown = BLIND.plan_to_blind(plan, SAMPLE.symbol)
    text = lang.format(shown)
    assert f"last > {float(190 * k):.3f} AND pnl > -{float(50 * k):.3f}" in text
    assert f"RISK maxloss {float(200 * k):.3f}" in text and f"LMT bid-{float(Fraction(5, 100) * k):.3f}" in text
    assert "vwap*1.005" in text and "0.5%" in text and "TARGET +1.2%" in text and "BUY 10" in text
    assert "maxloss 200" not in text and "190" not in text and "185" not in text
    assert BLIND.plan_from_blind(lang.parse(text), SAMPLE.symbol) == plan  # type: ignore[arg-type]


class _Limit:
    """Buys 10 at a limit two ticks under the last price it reads in the typed snapshot, with a
    stop ten ticks under it: the same plan a real and a blind run must arm."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False
    agent_id = "limit"
    model = ""

    def author(self, request: AuthorRequest) -> AgentReply:
        snap = request.snapshot
        assert snap is not None and request.instrument is not None
        if snap.quote is None:
            return AgentReply("PASS")
        tick = request.instrument.tick_size
        px, stop = snap.quote.last - 2 * tick, snap.quote.last - 10 * tick
        return AgentReply(f"PLAN lim\nWHEN last > 0: BUY 10 LMT {px:.6f} STOP @{stop:.6f}")


def test_a_blind_run_arms_and_fills_the_real_prices() -> None:
    """The agent writes prices read from the blind snapshot; the engine sees the real ones: the
    blind run's ledger is byte for byte the real run's, and it holds real prices."""
    opts = SessionOptions(checkpoints=("11:00", "14:00"))
    real = run_session(SAMPLE, _Limit(), opts, days=2)
    blind = run_session(SAMPLE, _Limit(), msgspec.structs.replace(opts, blind=True), days=2)
    assert blind.ledger_jsonl() == real.ledger_jsonl()
    blind_lines, real_lines = blind.capture_jsonl().splitlines(), real.capture_jsonl().splitlines()
    assert blind_lines[1:] == real_lines[1:]  # the turns as armed, in real values
    assert json.loads(blind_lines[0]) == {**json.loads(real_lines[0]), "blind": True}  # the header says blind
    fills = [json.loads(x) for x in real.ledger_jsonl().splitlines() if b'"fill"' in x]
    assert fills and all(150 < f["price"] < 250 for f in fills if "price" in f)  # the sample trades near 190


# ------------------------------------------------------------------------------------------
# the scan: nothing real in what a blind agent reads


_LO, _HI = float(np.min(SAMPLE.ticks.last)), float(np.max(SAMPLE.ticks.last))


def _news() -> NewsFeed:
    """Headlines naming the company, its ticker, dates, years and price levels."""
    out = []
    for k, s in enumerate(SAMPLE.sessions):
        d = s.date
        for j, (title, summary) in enumerate([
            (f"Sample Corp's shares hit ${_HI:.2f} on {d:%B} {d.day}, {d.year}", f"SAMPLE traded at {_LO:.2f}."),
            (f"Analysts lift {SAMPLE.symbol} target to $250; Apple Inc and Microsoft rally",
             f"Sample Corp said so on {d.day} {d:%B}, the {d.day}th, filed {d.isoformat()}."),
        ]):
            out.append(NewsItem(s.open_ns - (3 - j) * 3600 * NS_PER_S, (SAMPLE.symbol,), "Wire", title, summary))
    return NewsFeed.of(out)


NEWS = _news()
ALL = ResolvedView("all", tuple(
    ResolvedPane(spec.name, tuple((a.name, a.default if a.name != "since" else 60) for a in spec.args))
    for spec in DEFAULT_CATALOG), 4000)
PLAN = lang.parse("PLAN orb RISK maxloss 300\nWHEN last > 191.25: BUY 10 LMT 191.30 STOP @190.10 TARGET +1%")


SCAN = BlindScan.of([SAMPLE.symbol], [d.date for d in SAMPLE.sessions], [(_LO, _HI)])


def _scan(text: str) -> None:
    SCAN.check(text)


def _real_volumes(real_doc: dict[str, Any], real_text: str) -> set[float]:
    """The volumes and trade sizes the real briefing shows (above 1,500: the notice's quantities
    are whole numbers up to 1,500 that a volume may share)."""
    out = {float(v) for v in re.findall(r"(?:vol|avgvol|sz) (\d+(?:\.\d+)?)", real_text)}
    if real_doc["quote"]:
        out |= {float(real_doc["quote"]["size"]), float(real_doc["quote"]["volume"] or 0)}
    out |= {float(b["volume"]) for b in real_doc["bars"]}
    return {v for v in out if v > 1500}


def _scan_volumes(text: str, volumes: set[float]) -> None:
    text = re.sub(r"^VIEW .*$", "", text, flags=re.M)  # the view's token budget is the test's own number
    for m in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text):
        assert float(m) not in volumes, (m, text)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(SAMPLE.ticks) - 1), st.sampled_from([0, 300]), st.booleans())
def test_nothing_real_in_a_blind_briefing(k: int, guard_s: int, long: bool) -> None:
    assert _HI * 100 / float(SAMPLE.ticks.last[0]) < _LO * 0.97  # the blind scale cannot pass for the real one
    t = int(SAMPLE.ticks.ts[k]) + guard_s * NS_PER_S
    account = AccountState(position=10 if long else 0, avg_entry=float(SAMPLE.ticks.last[k]) if long else None,
                           upnl=12.5, rpnl=-3.0, fees=1.0,
                           orders=(WorkingOrder("o1", "sell", 10, "stp", float(SAMPLE.ticks.last[k]) - 1.0),))
    notices = (Notice("rejected", int(SAMPLE.ticks.ts[k]) - 1, "orb", "maxpos 1000: position would reach 1500 at 191.25", 1),)
    snap = freeze(SAMPLE, t, guard_s * NS_PER_S, account, PLAN if long else None, notices=notices, news=NEWS,  # type: ignore[arg-type]
                  blind=BLIND)
    ordinal = Ordinal(1, "11:00", t)
    text = briefing(snap, ordinal, ALL)
    assert "NEWS SYM1" in text and "INCUMBENT" in text if long else "PLAN none" in text
    _scan(text)
    for spec in DEFAULT_CATALOG:
        _scan(spec.builder(snap, {a.name: a.default for a in spec.args}))
    doc = msgspec.to_builtins(typed_snapshot(snap, ordinal))
    real_snap = freeze(SAMPLE, t, guard_s * NS_PER_S, account, PLAN if long else None, notices=notices, news=NEWS)  # type: ignore[arg-type]
    volumes = _real_volumes(msgspec.to_builtins(typed_snapshot(real_snap, ordinal)), briefing(real_snap, ordinal, ALL))
    _scan_volumes(text, volumes)
    _scan_volumes(json.dumps(doc), volumes)
    for quantity in ("size", "volume"):  # volumes are rescaled, not prices: the price scan skips them
        doc["quote"] and doc["quote"].pop(quantity, None)
        for bar in doc["bars"]:
            bar.pop(quantity, None)
    typed = json.dumps(doc)
    _scan(typed)
    for ts in re.findall(r'"(?:ts|start_ns|now_ns|cutoff_ns|open_ns|close_ns)":(\d+)', typed):
        assert dt.datetime.fromtimestamp(int(ts) / 1e9, dt.timezone.utc).year == 1970  # day k of the blind epoch


def test_the_news_is_masked_and_still_read() -> None:
    snap = freeze(SAMPLE, SAMPLE.sessions[2].open_ns, 0, news=NEWS, blind=BLIND)
    text = DEFAULT_CATALOG.get("news").builder(snap, {"n": 2, "symbol": "SYM1", "since": 1})  # type: ignore[union-attr]
    assert text == (
        "NEWS SYM1 2 since d2 16:00\n"
        "d3 07:30 Wire: Analysts lift SYM1 target to $[n]; [company] and [company] rally | SYM1 said so on [date], the [date], filed [date].\n"
        "d3 06:30 Wire: SYM1 shares hit $[n] on [date], [year] | SYM1 traded at [n].")
    assert [BLIND.day(SAMPLE.sessions[0].open_ns + k * 86_400 * NS_PER_S) for k in range(-1, 8)] == [
        "d1-1", "d1", "d2", "d3", "d4", "d5", "d5+1", "d5+2", "d6"]  # the sample: Monday to Friday, Monday
    _scan(text)


# ------------------------------------------------------------------------------------------
# the scan over a universe: each symbol its alias and scale, every universe pane included


def _other_universe() -> Universe:
    """The sample and a second symbol trading at three times its prices (a real range of its own,
    far from the sample's), with a split and a dividend of the sample's in the third session."""
    t = SAMPLE.ticks
    other = MarketData("OTHER", SAMPLE.tick_size, Ticks(t.ts, t.bid * 3, t.ask * 3, t.last * 3, t.size), SAMPLE.sessions,
                       instrument=Instrument(symbol="OTHER", tick_size=SAMPLE.tick_size))
    members = tuple(Member(d.symbol, d, d, Decimal(1)) for d in (other, SAMPLE))
    day = SAMPLE.sessions[2].date
    return Universe(members, SAMPLE.sessions, "XNYS", (Split("SAMPLE", day, 2, 1),), (Dividend("SAMPLE", day, 1.37),))


UNIVERSE = _other_universe()
UBLIND = blind_of(UNIVERSE)
_RANGES = [(float(np.min(m.data.ticks.last)) * 0.97, float(np.max(m.data.ticks.last)) * 1.03) for m in UNIVERSE.members]
UALL = ResolvedView("all", (
    ResolvedPane("watchlist"), ResolvedPane("portfolio", (("n", 20),)), ResolvedPane("events", (("n", 20), ("symbol", "all"))),
    ResolvedPane("news", (("n", 20), ("symbol", "all"), ("since", 60))),
    *(ResolvedPane(spec.name, (("symbol", alias), *((a.name, a.default) for a in spec.args[1:])))
      for alias in ("SYM1", "SYM2") for spec in DEFAULT_CATALOG if spec.per_symbol)), 4000)


USCAN = BlindScan(UNIVERSE.symbols, [d.date for d in SAMPLE.sessions], _RANGES)


def _uscan(text: str) -> None:
    USCAN.check(text)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(SAMPLE.ticks) - 1), st.sampled_from([0, 300]), st.booleans())
def test_nothing_real_in_a_blind_universe_briefing(k: int, guard_s: int, long: bool) -> None:
    from kestrel.frame.typed import typed_universe
    from kestrel.frame import freeze_universe, materialize_universe, universe_briefing

    t = int(SAMPLE.ticks.ts[k]) + guard_s * NS_PER_S
    px = float(SAMPLE.ticks.last[k])
    holdings = (Holding("OTHER", -4 if long else 0, 3 * px + 0.6 if long else None, 3 * px if long else None,
                        -12 * px if long else 0.0, 2.4 if long else 0.0),
                Holding("SAMPLE", 10 if long else 0, px - 0.5 if long else None, px if long else None,
                        10 * px if long else 0.0, 5.0 if long else 0.0))
    state = PortfolioState("USD", 100_000.0, 100_000.0 + 2 * px, 100_000.0 + 7.4, 22 * px, -2 * px,
                           2 if long else 0, holdings)
    notices = (Notice("rejected", int(SAMPLE.ticks.ts[k]) - 1, "orb", "maxpos 1000: position would reach 1500 at 191.25", 1),)
    snap = freeze_universe(UNIVERSE, t - guard_s * NS_PER_S, state, time_ns=t, news=NEWS, notices=notices,
                           plans={"SAMPLE": PLAN} if long else None, bounds=PortfolioBounds(100_000.0),  # type: ignore[dict-item]
                           blind=UBLIND)
    ordinal = Ordinal(1, "11:00", t)
    text = universe_briefing(snap, ordinal, UALL)
    assert "WATCHLIST 2" in text and "SYM1" in text and "SYM2" in text
    if long:
        assert "PORTFOLIO equity" in text and "INCUMBENT" in text
    _uscan(text)
    _uscan(universe_briefing(snap, ordinal))  # the default view
    _uscan(materialize_universe(UALL, snap))
    doc = msgspec.to_builtins(typed_universe(snap, ordinal))
    real = freeze_universe(UNIVERSE, t - guard_s * NS_PER_S, state, time_ns=t, news=NEWS, notices=notices,
                           plans={"SAMPLE": PLAN} if long else None, bounds=PortfolioBounds(100_000.0))  # type: ignore[dict-item]
    real_doc = msgspec.to_builtins(typed_universe(real, ordinal))
    volumes = {v for m in real_doc["members"] for v in _real_volumes({"quote": m["quote"], "bars": []}, "")}
    volumes |= _real_volumes({"quote": None, "bars": []}, materialize_universe(UALL, real))
    _scan_volumes(text, volumes)
    _scan_volumes(materialize_universe(UALL, snap), volumes)
    _scan_volumes(json.dumps(doc), volumes)
    for member in doc["members"]:
        if member["quote"]:  # volumes are rescaled, not prices: the price scan skips them
            member["quote"].pop("size", None)
            member["quote"].pop("volume", None)
    typed = json.dumps(doc)
    _uscan(typed)
    assert doc["account"]["cash"] is None and doc["portfolio_bounds"] is None  # money only relative
    for ts in re.findall(r'"(?:ts|start_ns|now_ns|cutoff_ns|open_ns|close_ns)":(\d+)', typed):
        assert dt.datetime.fromtimestamp(int(ts) / 1e9, dt.timezone.utc).year == 1970


def test_a_universe_alias_per_symbol_and_its_own_scale() -> None:
    from kestrel.frame import freeze_universe, materialize_universe

    assert sorted(UBLIND.alias(s) for s in UNIVERSE.symbols) == ["SYM1", "SYM2"]
    snap = freeze_universe(UNIVERSE, SAMPLE.sessions[3].open_ns, None, blind=UBLIND)
    watch = materialize_universe(ResolvedView("w", (ResolvedPane("watchlist"),), 4000), snap)
    rows = [line.split() for line in watch.splitlines()[2:4]]
    assert [r[0] for r in rows] == ["SYM1", "SYM2"] and rows[0][1] == rows[1][1]  # 3x the prices: one blind scale each
    sample = UBLIND.alias("SAMPLE")
    events = materialize_universe(ResolvedView("e", (ResolvedPane("events", (("n", 5), ("symbol", sample))),), 4000), snap)
    assert events == f"EVENTS {sample} 2\nd3 {sample} split 2:1\nd3 {sample} dividend {UBLIND.price_text('SAMPLE', 1.37)}"
