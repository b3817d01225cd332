"""The fast path's dense loop (kestrel/engine/dense.py) equals the reference byte for byte:
seeded random plans x random days with the loop forced from the first tick, the bench's
dense workloads under every hand-over policy (dense loop from tick 0, after a few events,
never, the compiled loop instead, a small memory cap), every example plan with and without
friction, one call and segments. Also: what the per-account-state forms are, and that a
plan without them falls back to the compiled loop."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig
from kestrel.engine.dense import FALSE_FORM, MAX_FORMS, TRUE_FORM, Feed, Unsupported
from kestrel.engine.policy import FastPolicy
from kestrel.engine.ledger import PositionChanged
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import Plan

from bench.engine_throughput import REARMING
from bench.workloads import ALL_DAY, RICH, example_plans
from engine_cases import armed, random_config, random_day, random_plan_text, realistic_day
from engine_helpers import plan

DENSE = FastPolicy(force_dense=True)
FRICTION = EngineConfig(maxorders=5000, slippage_ticks=1.0, fee_per_unit=0.005,
                        fee_per_order=1.0, latency_ticks=1, partial_fills=True)
POLICIES = {
    "dense_from_start": DENSE,
    "dense_after_3_events": FastPolicy(dense_ticks_per_event=1e9, min_events=3),
    "dense_small_cap": FastPolicy(force_dense=True, max_mask_ticks=3000),
    "never_dense": FastPolicy(dense_ticks_per_event=0.0, max_mask_ticks=10**9),
    "compiled_instead": FastPolicy(dense_loop=False),
}


def reference(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig) -> bytes:
    return armed(session, text, cfg).run(ticks, path="reference").to_jsonl()


def segmented(session: SessionSpec, ticks: Ticks, p: Plan, cfg: EngineConfig,
              policy: FastPolicy, segments: int, symbol: str = "TEST",
              tick_size: float = 0.01) -> tuple[bytes, int]:
    """The ledger of `run(segment, final=False)` over `segments` segments then `finish()`,
    and the ticks the dense loop ran."""
    e = Engine(cfg, session, p.instrument or symbol, tick_size)
    e.fast_policy = policy
    e.arm(p)
    n = len(ticks)
    step = -(-n // segments)
    dense = 0
    for a in range(0, n, step):
        e.run(ticks.slice(a, min(n, a + step)), final=False)
        if e.last_path == "fast":
            dense += e.fast_stats.dense_ticks
    e.finish()
    return e.ledger.to_jsonl(), dense


def first_difference(ref: bytes, got: bytes) -> str:
    ra, ga = ref.splitlines(), got.splitlines()
    k = next((i for i, (x, y) in enumerate(zip(ra, ga)) if x != y), min(len(ra), len(ga)))
    return f"line {k}: ref {ra[k] if k < len(ra) else None!r} / dense {ga[k] if k < len(ga) else None!r}"


def test_dense_loop_matches_reference_on_random_plans() -> None:
    """240 seeded random plans x days, the dense loop from the first tick (every other case
    with a 300-tick memory cap, so the compiled loop takes over mid-batch)."""
    rng = random.Random(20261201)
    days = [f(rng) for _ in range(6) for f in (random_day, realistic_day)]
    ran_dense = fills = 0
    for case in range(240):
        session, ticks = days[case % len(days)]
        text = random_plan_text(rng)
        cfg = random_config(rng)
        policy = DENSE if case % 2 == 0 else FastPolicy(force_dense=True, max_mask_ticks=300)
        e = armed(session, text, cfg)
        e.fast_policy = policy
        e.run(ticks, path="fast")
        ran_dense += e.fast_stats.dense_ticks > 0
        ref = reference(session, ticks, text, cfg)
        got = e.ledger.to_jsonl()
        assert got == ref, f"case {case}\n{text}\n{cfg}\n{first_difference(ref, got)}"
        fills += ref.count(b'"event":"fill"')
    assert ran_dense >= 200  # the loop really ran (not the compiled fallback or the jumps)
    assert fills > 240


@pytest.mark.parametrize("seed", range(8))
def test_dense_loop_in_segments_matches_reference(seed: int) -> None:
    """Random plans in 2-9 segments, the dense loop from each segment's first tick."""
    rng = random.Random(seed)
    session, ticks = (realistic_day if seed % 2 else random_day)(rng)
    text, cfg = random_plan_text(rng), random_config(rng)
    got, _ = segmented(session, ticks, plan(text), cfg, DENSE, rng.randrange(2, 10))
    assert got == reference(session, ticks, text, cfg)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("workload", ["all_day", "rich", "rearming"])
def test_dense_workloads_under_every_policy(workload: str, policy: str) -> None:
    text = {"all_day": ALL_DAY, "rich": RICH, "rearming": REARMING}[workload]
    rng = random.Random(23)
    for k, make in enumerate((realistic_day, random_day, realistic_day, realistic_day)):
        session, ticks = make(rng)
        cfg = (EngineConfig(maxorders=5000), random_config(rng), FRICTION, random_config(rng))[k]
        ref = reference(session, ticks, text, cfg)
        for segments in (1, 5):
            got, dense = segmented(session, ticks, plan(text), cfg, POLICIES[policy], segments)
            assert got == ref, (workload, policy, k, segments, first_difference(ref, got))
            if k == 0 and segments == 1:  # the policy really takes (or avoids) the dense loop
                assert (dense > 0) == (policy not in ("never_dense", "compiled_instead"))
        if k == 0:
            assert ref.count(b'"event":"fill"') >= 20  # the workload really trades all day


def _sample_days() -> list[tuple[SessionSpec, Ticks, float]]:
    data = generate(SyntheticSpec(sessions=2))
    return [(s, data.between(s.open_ns, s.close_ns).ticks, data.tick_size) for s in data.sessions]


@pytest.mark.parametrize("cname", ["plain", "friction"])
def test_every_example_plan_on_the_dense_loop(cname: str) -> None:
    cfg = EngineConfig(maxorders=5000) if cname == "plain" else FRICTION
    ran = 0
    for session, ticks, tick_size in _sample_days():
        for name, p in example_plans():
            e = Engine(cfg, session, p.instrument or "SAMPLE", tick_size)
            e.arm(p)
            if not e.fast_applies():
                continue
            ref = e.run(ticks, path="reference").to_jsonl()
            for policy, segments in ((DENSE, 1), (DENSE, 7), (FastPolicy(), 7)):
                got, dense = segmented(session, ticks, p, cfg, policy, segments, "SAMPLE", tick_size)
                assert got == ref, (name, cname, segments, first_difference(ref, got))
                ran += dense > 0
    assert ran >= 40


# ---------------------------------------------------------------------------- forms
SESSION = SessionSpec.us_equity(dt.date(2024, 4, 8))


def _feed(text: str) -> Feed:
    p = plan(text)
    n = 200
    ts = SESSION.open_ns + np.arange(n, dtype=np.int64) * 1_000_000_000
    bid = 100.0 + np.round(np.sin(np.arange(n) / 7.0), 2)
    ticks = Ticks.from_arrays(ts, bid, bid + 0.01)
    return Feed(p.rules, ticks, SESSION, 0, 200.0, 0, n)


def test_forms_fold_account_state_into_constants_or_static_arrays() -> None:
    feed = _feed("PLAN f\nWHEN pos == 0 AND mid > 100: BUY 1 MKT\n"
                 "WHEN mid < 100 OR rpnl > 5: FLAT\nWHEN NOT (pos > 0): FLAT")
    flat = feed.forms((0.0, 0.0))
    long_ = feed.forms((100.0, 10.0))
    assert long_ == (FALSE_FORM, TRUE_FORM, FALSE_FORM)
    assert flat[2] == TRUE_FORM
    mid = feed.cols.series("mid")
    above, below = flat[0], flat[1]
    assert above >= 0 and below >= 0 and above != below
    assert np.array_equal(feed.arrays[above], mid > 100)
    assert np.array_equal(feed.arrays[below], mid < 100)
    assert 0 < np.count_nonzero(mid > 100) < len(mid)  # the forms are not constant arrays


def test_a_comparison_mixing_account_and_ticks_has_no_form_and_runs_compiled() -> None:
    text = "PLAN m\nWHEN pos < vol - 5000 AND spread < 0.05: BUY 1 MKT STOP -0.5% x20"
    with pytest.raises(Unsupported):
        _feed(text)
    rng = random.Random(5)
    session, ticks = realistic_day(rng)
    cfg = EngineConfig(maxorders=5000)
    e = armed(session, text, cfg)
    e.fast_policy = DENSE
    e.run(ticks, path="fast")
    assert e.fast_stats.dense_ticks == 0 and e.fast_stats.compiled_ticks == len(ticks)
    assert e.ledger.to_jsonl() == reference(session, ticks, text, cfg)



# ------------------------------------------------------------------ state across calls
@pytest.mark.parametrize("seed", range(400, 412))
def test_dense_loop_mid_session_arm_and_mixed_paths(seed: int) -> None:
    """A plan armed mid-session (its crosses start fresh there), then the dense loop, a
    reference batch, the dense loop again: the ledger of one reference run."""
    rng = random.Random(seed)
    session, ticks = (realistic_day if seed % 2 else random_day)(rng)
    text, cfg = random_plan_text(rng), random_config(rng)
    n = len(ticks)
    cut, a, b = sorted(rng.sample(range(1, n - 1), 3))
    out = []
    for dense in (False, True):
        e = Engine(cfg, session, "TEST", 0.01)
        e.fast_policy = DENSE
        e.on_ticks(ticks.slice(0, cut))
        e.arm(plan(text))
        if dense:
            e.run(ticks.slice(cut, a), final=False)
            e.on_ticks(ticks.slice(a, b))
            e.run(ticks.slice(b, n))
        else:
            e.run(ticks.slice(cut, n), path="reference")
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]


def test_dense_loop_with_a_carried_position() -> None:
    """Day two opens with day one's position and protective orders (end_of_day="carry"):
    the dense loop from its first tick equals the reference."""
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
        for dense in (False, True):
            e = Engine(cfg, day2[0], "TEST", 0.01, carry=carry)
            e.arm(plan(text))
            if dense:
                e.fast_policy = DENSE
                e.run(day2[1], path="fast")
                assert e.fast_stats.dense_ticks > 0
            else:
                e.run(day2[1], path="reference")
            out.append(e.ledger.to_jsonl())
        assert out[0] == out[1], seed
    assert carried >= 2  # some days really open with a position


def test_forms_past_the_cap_are_renumbered_and_stay_exact() -> None:
    """Three rules whose AND of (account OR tick) parts takes a different combination under
    each of eight positions: more forms over all states than MAX_FORMS, never more at once;
    every state's forms (after the renumbering) are the conditions evaluated directly, and
    the bits hold them."""
    rules = "\n".join(
        f"WHEN mid > {99.4 + r / 10} AND (pos == 1 OR pos == 5 OR pos == 6 OR mid > {99.6 + r / 10})"
        f" AND (pos == 2 OR pos == 5 OR pos == 7 OR mid > {99.8 + r / 10})"
        f" AND (pos == 3 OR pos == 6 OR pos == 7 OR mid > {100.0 + r / 10}): FLAT"
        for r in range(3))
    feed = _feed("PLAN g\n" + rules)
    held, renumbered = 0, False
    for _ in range(2):
        for pos in range(8):
            forms = feed.forms((float(pos), 0.0))
            assert len(feed.arrays) <= MAX_FORMS
            renumbered |= len(feed.arrays) < held
            held = len(feed.arrays)
            feed.cols.account = {"pos": float(pos), "rpnl": 0.0}
            bits = np.frombuffer(feed.window_bytes(0, feed.upto), dtype="<i8").astype(np.int64)
            for rule, f in zip(feed.rules, forms):
                want = feed.cols.truth(rule.cond)
                if f < 0:
                    assert np.all(want == (f == TRUE_FORM))
                else:
                    assert np.array_equal(feed.arrays[f], want)
                    assert np.array_equal((bits >> f) & 1, want.astype(np.int64))
                    assert np.array_equal((bits >> (MAX_FORMS + f)) & 1, (~want).astype(np.int64))
    assert renumbered  # the states really outgrew the cap


def test_dense_loop_equals_reference_while_forms_are_renumbered() -> None:
    """The plan above trading: its position walks 0..8 and back, so the loop renumbers its
    forms mid-session; the ledger is still the reference's."""
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
        e.fast_policy = DENSE
        e.run(ticks, path="fast")
        assert e.fast_stats.dense_ticks > 0
        assert e.ledger.to_jsonl() == ref
        held = {ev.pos for ev in e.ledger.events if isinstance(ev, PositionChanged)}
        assert len(held) >= 6  # the position really walks through the states
