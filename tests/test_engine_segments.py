"""A day fed in many small segments (`run(segment, final=False)`, as the session runner does
per feed batch) gives exactly the ledger of one call, on the fast path."""

from __future__ import annotations

import random

import msgspec
import pytest

from kestrel.engine import Engine
from kestrel.engine.history import TickHistory
from kestrel.market.ticks import Ticks

from engine_cases import armed, random_config, random_plan_text, realistic_day

# armed all day: the rules keep re-arming, so every segment evaluates them on the fast path
ALL_DAY = [
    "PLAN x\nWHEN mid CROSSES ABOVE sma(mid, 50) AND pos <= 0: BUY 10 MKT STOP -0.5% "
    "TARGET +1% x50\nWHEN mid CROSSES BELOW sma(mid, 50) AND pos > 0: FLAT x50",
    "PLAN y\nWHEN last > high(5m) AND spread < 0.05: BUY 5 MKT TRAIL 0.3% x40\n"
    "WHEN last < low(5m): SELL 5 LMT bid + 0.02 TTL 30s x40",
]


def segmented(e: Engine, ticks: Ticks, size: int) -> list[str]:
    paths: list[str] = []
    for a in range(0, len(ticks), size):
        e.run(ticks.slice(a, min(a + size, len(ticks))), final=False)
        paths.append(e.last_path)
    e.finish()
    return paths


@pytest.mark.parametrize("case", range(8))
def test_500_tick_segments_give_the_single_call_ledger(case: int) -> None:
    rng = random.Random(5000 + case)
    session, ticks = realistic_day(rng)
    cfg = random_config(rng)
    if case < len(ALL_DAY):
        cfg = msgspec.structs.replace(cfg, maxorders=1000, maxloss=100_000.0, maxpos=1000)
    text = ALL_DAY[case] if case < len(ALL_DAY) else random_plan_text(rng)
    one = armed(session, text, cfg)
    one.run(ticks, path="fast")
    assert one.last_path == "fast"
    many = armed(session, text, cfg)
    paths = segmented(many, ticks, 500)
    assert len(paths) == -(-len(ticks) // 500) and paths[0] == "fast"
    if case < len(ALL_DAY):  # still armed at the end: every segment ran fast
        assert set(paths) == {"fast"}
        assert sum(1 for ev in one.ledger.events if ev.__class__.__name__ == "Fired") >= 3
    assert many.ledger.to_jsonl() == one.ledger.to_jsonl()
    ref = armed(session, text, cfg)
    ref.run(ticks, path="reference")
    assert ref.ledger.to_jsonl() == one.ledger.to_jsonl()


def test_history_is_the_concatenation_of_the_batches() -> None:
    rng = random.Random(7)
    _, ticks = realistic_day(rng)
    h = TickHistory()
    cuts = [0, 1, 1, 700, 5000, 5001, len(ticks)]
    views = []
    for a, b in zip(cuts, cuts[1:]):
        h.append(ticks.slice(a, b))
        views.append(h.view())
    whole = h.view()
    assert len(h) == len(ticks)
    for col in ("ts", "bid", "ask", "last", "size"):
        assert (getattr(whole, col) == getattr(ticks, col)).all()
    # an earlier view is unchanged by later appends (rows are never rewritten)
    assert (views[2].bid == ticks.bid[:700]).all() and len(views[2]) == 700
