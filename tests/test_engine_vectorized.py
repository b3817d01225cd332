"""The vectorized path (kestrel/engine/fast.py) equals the reference byte for byte: random plans
in segments, every example plan with and without friction in one call and in segments, plans
whose conditions mix account state with tick series, many account states, a plan armed
mid-session with paths mixed, a carried position; and its masks find what they hold."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig
from kestrel.engine.fast import FastPolicy, Mask
from kestrel.engine.ledger import PositionChanged
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import Plan

from bench.workloads import ALL_DAY, RICH, example_plans
from engine_cases import armed, random_config, random_day, random_plan_text, realistic_day
from engine_helpers import plan

SMALL = FastPolicy(first_prefix=40, first_chunk=3)  # prefixes extended, chunk edges crossed
FRICTION = EngineConfig(maxorders=5000, slippage_ticks=1.0, fee_per_unit=0.005,
                        fee_per_order=1.0, latency_ticks=1, partial_fills=True)


def reference(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig) -> bytes:
    return armed(session, text, cfg).run(ticks, path="reference").to_jsonl()


def segmented(session: SessionSpec, ticks: Ticks, p: Plan, cfg: EngineConfig,
              policy: FastPolicy, segments: int, symbol: str = "TEST",
              tick_size: float = 0.01) -> tuple[bytes, int]:
    """The ledger of `run(segment, final=False)` over `segments` segments then `finish()`,
    and the ticks the vectorized path ran itself (not handed over)."""
    e = Engine(cfg, session, p.instrument or symbol, tick_size)
    e.fast_policy = policy
    e.arm(p)
    n = len(ticks)
    step = -(-n // segments)
    ran = 0
    for a in range(0, n, step):
        e.run(ticks.slice(a, min(n, a + step)), final=False)
        if e.last_path == "fast":
            ran += min(n, a + step) - a - e.fast_stats.handed_over
    e.finish()
    return e.ledger.to_jsonl(), ran


def first_difference(ref: bytes, got: bytes) -> str:
    ra, ga = ref.splitlines(), got.splitlines()
    k = next((i for i, (x, y) in enumerate(zip(ra, ga)) if x != y), min(len(ra), len(ga)))
    return f"line {k}: ref {ra[k] if k < len(ra) else None!r} / fast {ga[k] if k < len(ga) else None!r}"


@pytest.mark.parametrize("seed", range(8))
def test_random_plans_in_segments_match_reference(seed: int) -> None:
    rng = random.Random(seed)
    session, ticks = (realistic_day if seed % 2 else random_day)(rng)
    text, cfg = random_plan_text(rng), random_config(rng)
    for policy in (FastPolicy(), SMALL):
        got, _ = segmented(session, ticks, plan(text), cfg, policy, rng.randrange(2, 10))
        assert got == reference(session, ticks, text, cfg)


def _sample_days() -> list[tuple[SessionSpec, Ticks, float]]:
    data = generate(SyntheticSpec(sessions=2))
    return [(s, data.between(s.open_ns, s.close_ns).ticks, data.tick_size) for s in data.sessions]


@pytest.mark.parametrize("cname", ["plain", "friction"])
def test_every_example_plan_on_the_vectorized_path(cname: str) -> None:
    cfg = EngineConfig(maxorders=5000) if cname == "plain" else FRICTION
    ran = 0
    for session, ticks, tick_size in _sample_days():
        for name, p in example_plans():
            e = Engine(cfg, session, p.instrument or "SAMPLE", tick_size)
            e.arm(p)
            if not e.fast_applies():
                continue
            ref = e.run(ticks, path="reference").to_jsonl()
            for policy, segments in ((FastPolicy(), 1), (SMALL, 1), (FastPolicy(), 7)):
                got, vectorized = segmented(session, ticks, p, cfg, policy, segments, "SAMPLE", tick_size)
                assert got == ref, (name, cname, segments, first_difference(ref, got))
                ran += vectorized > 0
    assert ran >= 40


def test_a_comparison_mixing_account_and_ticks_runs_vectorized() -> None:
    text = "PLAN m\nWHEN pos < vol / 1000 - 5 AND spread < 0.05: BUY 1 MKT STOP -0.5% x20"
    session, ticks = realistic_day(random.Random(5))
    cfg = EngineConfig(maxorders=5000)
    e = armed(session, text, cfg)
    e.run(ticks, path="fast")
    assert e.fast_stats.handed_over == 0 and e.fast_stats.events > 20
    assert e.ledger.to_jsonl() == reference(session, ticks, text, cfg)


@pytest.mark.parametrize("seed", range(400, 412))
def test_mid_session_arm_and_mixed_paths(seed: int) -> None:
    """A plan armed mid-session (its crosses start fresh there), then the vectorized path, a
    reference batch, the vectorized path again: the ledger of one reference run."""
    rng = random.Random(seed)
    session, ticks = (realistic_day if seed % 2 else random_day)(rng)
    text, cfg = random_plan_text(rng), random_config(rng)
    n = len(ticks)
    cut, a, b = sorted(rng.sample(range(1, n - 1), 3))
    out = []
    for mixed in (False, True):
        e = Engine(cfg, session, "TEST", 0.01)
        e.fast_policy = SMALL
        e.on_ticks(ticks.slice(0, cut))
        e.arm(plan(text))
        if mixed:
            e.run(ticks.slice(cut, a), final=False)
            e.on_ticks(ticks.slice(a, b))
            e.run(ticks.slice(b, n))
        else:
            e.run(ticks.slice(cut, n), path="reference")
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]


def test_a_carried_position() -> None:
    """Day two opens with day one's position and protective orders (end_of_day="carry"):
    the vectorized path equals the reference."""
    carried = 0
    for seed in range(8):
        rng = random.Random(seed)
        cfg = EngineConfig(maxorders=5000, end_of_day="carry")
        day1, day2 = realistic_day(rng), realistic_day(rng)
        text = RICH if seed % 2 else ALL_DAY
        first = armed(day1[0], text, cfg)
        first.run(day1[1].slice(0, len(day1[1]) - 1 - seed * 7))  # stop mid-trade on some days
        carry = first.carry_out()
        carried += carry is not None
        out = []
        for path in ("reference", "fast"):
            e = Engine(cfg, day2[0], "TEST", 0.01, carry=carry)
            e.arm(plan(text))
            e.run(day2[1], path=path)
            out.append(e.ledger.to_jsonl())
        assert out[0] == out[1], seed
    assert carried >= 2  # some days really open with a position

def test_conditions_under_many_positions() -> None:
    """A plan whose AND of (account OR tick) parts takes a different combination under each
    of eight positions, trading: its position walks 0..8 and back, each position its masks;
    the ledger is still the reference's."""
    rules = "\n".join(
        f"WHEN mid > {99.4 + r / 10} AND (pos == 1 OR pos == 5 OR pos == 6 OR mid > {99.6 + r / 10})"
        f" AND (pos == 2 OR pos == 5 OR pos == 7 OR mid > {99.8 + r / 10})"
        f" AND (pos == 3 OR pos == 6 OR pos == 7 OR mid > {100.0 + r / 10}): BUY 1 MKT x40"
        for r in range(3))
    text = "PLAN g RISK maxpos 50\n" + rules + "\nWHEN pos >= 8: FLAT x40"
    rng = random.Random(8)
    for _ in range(3):
        session, ticks = realistic_day(rng)
        mid = float((ticks.bid[0] + ticks.ask[0]) / 2)
        shifted = text
        for r in range(3):  # thresholds around this day's opening mid
            for base in (99.4, 99.6, 99.8, 100.0):
                shifted = shifted.replace(f"> {base + r / 10}", f"> {mid - 100 + base + r / 10:.2f}")
        cfg = EngineConfig(maxorders=5000)
        ref = reference(session, ticks, shifted, cfg)
        e = armed(session, shifted, cfg)
        e.run(ticks, path="fast")
        assert e.fast_stats.handed_over == 0
        assert e.ledger.to_jsonl() == ref
        held = {ev.pos for ev in e.ledger.events if isinstance(ev, PositionChanged)}
        assert len(held) >= 6  # the position really walks through the states


def test_a_mask_finds_the_first_tick_that_holds_or_not() -> None:
    values = np.array([False, True, True, False, False, True])
    m = Mask(10, np.ascontiguousarray(values).tobytes())
    assert [m.at(k) for k in range(10, 16)] == values.tolist()
    assert (m.find(True, 10, 16), m.find(True, 13, 16), m.find(True, 13, 15)) == (11, 15, 15)
    assert (m.find(False, 11, 16), m.find(False, 15, 16)) == (13, 16)
