"""Differential: the same sessions on the engine's fast path (`engine_path="auto"`) and on the
per-tick reference path give byte-identical ledgers and captures, directly and on actors."""

from __future__ import annotations

from kestrel.engine import EngineConfig

from pathlib import Path

import pytest

from kestrel.service.actors.driver import simulate
from kestrel import lang
from kestrel.agents.baseline import BaselineAgent
from kestrel.agents.fixed import FixedAgent
from kestrel.agents.recorded import RecordedAgent
from kestrel.agents.scripted import ScriptedAgent
from kestrel.data.sample import load_sample
from kestrel.market import MarketData
from kestrel.session.capture import CapturedTurn
from kestrel.session.protocol import AgentTurn, PassTurn, StandDownTurn, Supersede, Usage
from kestrel.market.ticks import Ticks
from kestrel.session.options import EnginePath
from kestrel.session.runner import SessionDay, SessionError, SessionOptions, SessionResult, run_session

CHECKS = ("10:30", "12:00", "14:00")
DATES = ("2024-04-11", "2024-04-12", "2024-04-15")

PLANS = [
    # breakout with brackets
    "PLAN a UNTIL 15:30 RISK maxpos 200 maxloss 500\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.8 TARGET +1.2\n"
    "WHEN time >= 10:00 AND last < low(30m): SELL 100 MKT STOP +0.8 TARGET -1.2\n",
    # limit entry with a TTL, an sma cross and a trailing stop
    "PLAN b FOR 120m RISK maxpos 300 maxloss 300\n"
    "WHEN mid CROSSES ABOVE sma(mid, 200): BUY 50 LMT bid TRAIL 0.5 TTL 10m\n"
    "WHEN pos > 0 AND chg(15m) < -0.3%: FLAT\n",
    # fades reading vwap, a repeat and an absolute target
    "PLAN c RISK maxpos 150 maxloss 250\n"
    "WHEN last > vwap + 1.5 AND pos == 0: SELL 50 MKT STOP +1 TARGET -0.6 x2\n"
    "WHEN last < vwap - 1.5 AND pos == 0: BUY 50 MKT STOP -1 TARGET +0.6 x2\n",
]


@pytest.fixture(scope="module")
def sample() -> MarketData:
    return load_sample()


def _turns() -> list[CapturedTurn]:
    """Per day: OPEN arms a plan, then supersede / pass / stand down at the checkpoints."""
    plans = [lang.parse(p) for p in PLANS]
    turns: list[CapturedTurn] = []
    for d, date in enumerate(DATES):
        seq: list[AgentTurn] = [
            Supersede(plans[d % 3]),  # type: ignore[arg-type]
            Supersede(plans[(d + 1) % 3]),  # type: ignore[arg-type]
            PassTurn(),
            StandDownTurn("late") if d != 1 else Supersede(plans[(d + 2) % 3]),  # type: ignore[arg-type]
        ]
        for label, turn in zip(("OPEN", *CHECKS), seq):
            turns.append(CapturedTurn(date, label, turn, "recorded"))
    return turns


def _sessions(sample: MarketData, path: EnginePath) -> list[SessionResult]:
    opts = SessionOptions(checkpoints=CHECKS, engine_path=path)
    scripted = ScriptedAgent(
        ["VIEW scout: quote, tape(3)", "PLAN broken", PLANS[0], "PASS", PLANS[1], "STANDDOWN"] * 3,
        usage=Usage(input=40, output=8),
    )
    out = [
        run_session(sample, BaselineAgent(), opts, days=3),
        run_session(sample, FixedAgent(PLANS[2], name="c"), opts, days=3),
        run_session(sample, RecordedAgent(_turns()), opts, days=3),
        run_session(sample, scripted, opts, days=3),
    ]
    scripted.assert_finished()
    return out


def test_fast_and_reference_paths_give_byte_identical_sessions(sample: MarketData) -> None:
    fast, ref = _sessions(sample, "auto"), _sessions(sample, "reference")
    for f, r in zip(fast, ref):
        assert [d.date for d in f.days] == list(DATES)
        assert f.ledger_jsonl() == r.ledger_jsonl()
        assert f.capture_jsonl() == r.capture_jsonl()
        assert [d.outcomes for d in f.days] == [d.outcomes for d in r.days]
        assert f.engine_path == "auto" and r.engine_path == "reference"
        # the reference run never took the fast path
        assert all(d.engine_ticks["fast"] == 0 for d in r.days)
        assert [d.engine_ticks["reference"] for d in r.days] == [len(_day_ticks(sample, x)) for x in DATES]
    # the comparison is not vacuous: the fast path ran for most of each agent's armed ticks
    for f in fast:
        assert sum(d.engine_ticks["fast"] for d in f.days) > 20_000
    # and the sessions traded
    assert all(len(f.ledger_jsonl().splitlines()) > 20 for f in fast)


def _day_ticks(sample: MarketData, date: str) -> Ticks:
    session = next(s for s in sample.sessions if s.date.isoformat() == date)
    return SessionDay.of(sample, session, (), 300).ticks


@pytest.mark.anyio
async def test_actors_on_the_fast_path_match_the_direct_reference_path(
    sample: MarketData, anyio_backend: str
) -> None:
    opts = SessionOptions(checkpoints=CHECKS, engine_path="reference")
    ref = run_session(sample, RecordedAgent(_turns()), opts, days=3)
    on_actors = await simulate(
        sample, RecordedAgent(_turns()), SessionOptions(checkpoints=CHECKS), days=3, batch=700
    )
    assert on_actors.ledger_jsonl() == ref.ledger_jsonl()
    assert on_actors.capture_jsonl() == ref.capture_jsonl()
    assert sum(d.engine_ticks["fast"] for d in on_actors.days) > 20_000


def test_an_unknown_engine_path_is_refused() -> None:
    with pytest.raises(SessionError, match="unknown engine path 'turbo'"):
        SessionOptions(engine_path="turbo")  # type: ignore[arg-type]  # the wrong value on purpose


def test_paths_agree_on_real_eurusd_quotes(shared_data: Path) -> None:
    from kestrel.data import load

    data = load(shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet").data
    # the operator's caps bind: allow FX sizes (the baseline agent sizes in units)
    operator = EngineConfig(maxpos=1_000_000)
    results = {
        path: run_session(data, BaselineAgent(), SessionOptions(checkpoints=("03:00", "09:00"), engine=operator,
                                                               engine_path=path), days=4)
        for path in ("auto", "reference")
    }
    auto, ref = results["auto"], results["reference"]
    assert auto.ledger_jsonl() == ref.ledger_jsonl()
    assert sum(d.engine_ticks["fast"] for d in auto.days) > 10_000
    assert sum(d.summary.fills for d in auto.days) >= 4
