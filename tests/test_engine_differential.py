"""Differential test: the fast path's ledger equals the reference path's, byte for byte,
over seeded random plans x random days (240 pairs; half the days are full 6.5-hour
sessions from the data generator with price jumps and halts). Also: the reference ledger does not
depend on how the ticks are split into batches, and two runs give the same bytes."""

from __future__ import annotations

import random
import re
from collections import Counter

import numpy as np
import pytest

from kestrel.engine import Engine, EngineConfig, Ledger
from kestrel.market.instrument import lots_in
from kestrel.engine.fast import FastPolicy
from kestrel.engine.ledger import (
    Cancelled,
    Disarmed,
    Filled,
    Fired,
    LedgerEvent,
    OrderPlaced,
    OrderRejected,
)
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

from bench.workloads import ALL_DAY, RICH
from engine_cases import armed, random_config, random_day, random_plan_text, realistic_day
from engine_helpers import plan

N_CASES = 240


def test_random_days_have_the_silence_they_promise() -> None:
    """The generator's 2-20 minute silence is really in the timestamps (it once was added
    after they were computed, so no day had one)."""
    for seed in range(40):
        _, ticks = random_day(random.Random(seed))
        longest = int(np.diff(ticks.ts).max())
        assert 120 * 10**9 <= longest < 1200 * 10**9 + 60 * 10**9, (seed, longest / 1e9)


def expected_path(text: str) -> str:
    """The path `run(path="auto")` must take, read off the plan text (not asked of the
    engine): the generated plans never read upnl or pnl and never cross account state, so
    the fast path always applies to them."""
    assert not re.search(r"\b(upnl|pnl)\b", text)
    assert not any("CROSSES" in part and re.search(r"\b(pos|rpnl)\b", part)
                   for part in re.split(r"\b(?:AND|OR)\b|\n|:", text))
    return "fast"


def armed_at(session: SessionSpec, text: str, last_ts: int) -> bool:
    """Whether a plan armed after a tick at `last_ts` is live, read off the plan text: not
    when the session has closed or its UNTIL has passed (FOR counts from the arming)."""
    m = re.search(r"UNTIL (\d\d):(\d\d)", text)
    until = session.wall_clock_ns(int(m[1]), int(m[2])) if m else session.close_ns
    return last_ts < session.close_ns and last_ts < until


def both_paths(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig,
               policy: FastPolicy = FastPolicy()) -> tuple[bytes, bytes]:
    fast = armed(session, text, cfg)
    fast.fast_policy = policy
    assert expected_path(text) == "fast"
    fast.run(ticks, path="auto")
    assert fast.last_path == "fast"
    return reference_ledger(session, ticks, text, cfg), fast.ledger.to_jsonl()


def test_fast_path_matches_reference_byte_for_byte() -> None:
    rng = random.Random(20261129)
    days = [f(rng) for _ in range(6) for f in (random_day, realistic_day)]
    total_fills = total_fired = 0
    seen: Counter[str] = Counter()
    for case in range(N_CASES):
        session, ticks = days[case % len(days)]
        text = random_plan_text(rng)
        cfg = random_config(rng)
        # odd cases: tiny prefixes and scan chunks, so prefix extension and chunk edges run
        policy = FastPolicy(first_prefix=40, first_chunk=3) if case % 2 else FastPolicy()
        ref, fast = both_paths(session, ticks, text, cfg, policy)
        if ref != fast:
            ra, fa = ref.splitlines(), fast.splitlines()
            k = next((i for i, (x, y) in enumerate(zip(ra, fa)) if x != y), min(len(ra), len(fa)))
            pytest.fail(f"case {case} differs at line {k}\nplan:\n{text}\n{cfg}\n"
                        f"ref:  {ra[k] if k < len(ra) else None!r}\nfast: {fa[k] if k < len(fa) else None!r}")
        events = Ledger.from_jsonl(ref).events
        total_fills += sum(isinstance(e, Filled) for e in events)
        total_fired += sum(isinstance(e, Fired) for e in events)
        seen.update(_features(events, long_day=len(ticks) > 10_000))
    # the generated cases must exercise the broker, not just idle: every order role fills,
    # every deadline and risk bound trips, and the full-length days trade
    assert total_fired > N_CASES and total_fills > N_CASES
    wanted = {f"fill:{r}" for r in ("entry", "stop", "target", "trail", "flat", "exit")}
    wanted |= {"cancel:ttl", "cancel:oco", "cancel:expired", "cancel:reversed", "fill:long_day",
               "disarm:maxloss", "reject:maxpos", "reject:maxorders", "disarm:expired",
               "disarm:session close", "disarm:session maxloss", "reject:worst-case"}
    assert {k for k, v in seen.items() if v >= 2} >= wanted, wanted - set(seen)


LOTS = (0.0001, 0.001, 0.01, 0.5, 100.0)
N_LOT_CASES = 150


def test_fractional_lots_match_reference_byte_for_byte() -> None:
    """Random plans in lots of 0.0001 to 100 (quantities, maxpos, money bounds and fees scaled
    by the lot): the vectorized path's ledger is the reference's byte for byte, every quantity
    in it is a whole number of lots, and the figures the whole-unit cases reach are reached."""
    rng = random.Random(20261201)
    days = [f(rng) for _ in range(4) for f in (random_day, realistic_day)]
    seen: Counter[str] = Counter()
    for case in range(N_LOT_CASES):
        lot = LOTS[case % len(LOTS)]
        session, ticks = days[case % len(days)]
        text = random_plan_text(rng, lot=lot)
        cfg = random_config(rng, lot=lot)
        policy = FastPolicy(first_prefix=40, first_chunk=3) if case % 2 else FastPolicy()
        ref, fast = both_paths(session, ticks, text, cfg, policy)
        if ref != fast:
            ra, fa = ref.splitlines(), fast.splitlines()
            k = next((i for i, (x, y) in enumerate(zip(ra, fa)) if x != y), min(len(ra), len(fa)))
            pytest.fail(f"case {case} (lot {lot}) differs at line {k}\nplan:\n{text}\n{cfg}\n"
                        f"ref:  {ra[k] if k < len(ra) else None!r}\nfast: {fa[k] if k < len(fa) else None!r}")
        events = Ledger.from_jsonl(ref).events
        for e in events:
            for name in ("qty", "pos"):
                q = getattr(e, name, None)
                if q is not None:
                    assert lots_in(q, lot) is not None, (lot, e)
                    assert isinstance(q, int) == (lot == 100.0), (lot, e)  # a whole lot: ints
        seen.update(_features(events, long_day=len(ticks) > 10_000))
    wanted = {"fill:entry", "fill:stop", "fill:target", "fill:exit", "reject:maxpos",
              "disarm:maxloss", "cancel:oco"}
    assert {k for k, v in seen.items() if v >= 2} >= wanted, wanted - set(seen)


N_INDICATOR_CASES = 300


def test_plans_on_the_new_indicators_match_reference_byte_for_byte() -> None:
    """300 seeded random plans whose conditions (and some limit prices) use rsi, stdev, zscore,
    the Bollinger bands, macd, macdsignal, abs, min and max, ticks and bars, on both paths."""
    rng = random.Random(20261202)
    days = [f(rng) for _ in range(4) for f in (random_day, realistic_day)]
    fired = 0
    used: Counter[str] = Counter()
    for case in range(N_INDICATOR_CASES):
        session, ticks = days[case % len(days)]
        text = random_plan_text(rng, indicators=True)
        cfg = random_config(rng)
        policy = FastPolicy(first_prefix=40, first_chunk=3) if case % 3 == 0 else FastPolicy()
        ref, fast = both_paths(session, ticks, text, cfg, policy)
        assert ref == fast, f"case {case}\nplan:\n{text}\n{cfg}"
        fired += ref.count(b'"event":"fired"') > 0
        used.update(name for name in ("rsi", "stdev", "zscore", "bbupper", "bblower", "macd(",
                                      "macdsignal", "abs", "min", "max") if name in text)
    assert fired > N_INDICATOR_CASES // 2  # the plans really fire
    assert min(used.values()) >= 10 and len(used) == 10, used


def _features(events: list[LedgerEvent], long_day: bool) -> Counter[str]:
    """What a ledger exercised: fills by order role, cancel/disarm/reject reasons."""
    roles: dict[int, str] = {}
    out: Counter[str] = Counter()
    for e in events:
        if isinstance(e, OrderPlaced):
            roles[e.id] = e.role
        elif isinstance(e, Filled):
            out["fill:" + roles[e.id]] += 1
            out["fill:long_day"] += long_day
        elif isinstance(e, Cancelled):
            out["cancel:" + e.reason.split()[0]] += 1
        elif isinstance(e, Disarmed):
            words = e.reason.split()
            out["disarm:" + (" ".join(words[:2]) if words[0] == "session" else words[0])] += 1
        elif isinstance(e, OrderRejected):
            out["reject:" + e.reason.split()[0]] += 1
    return out


def random_case(rng: random.Random) -> tuple[SessionSpec, Ticks, str, EngineConfig]:
    session, ticks = random_day(rng)
    return session, ticks, random_plan_text(rng), random_config(rng)


def reference_ledger(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig) -> bytes:
    return armed(session, text, cfg).run(ticks, path="reference").to_jsonl()


@pytest.mark.parametrize("seed", range(6))
def test_reference_does_not_depend_on_batching(seed: int) -> None:
    rng = random.Random(seed)
    session, ticks, text, cfg = random_case(rng)
    parts = armed(session, text, cfg)
    cuts = sorted(rng.sample(range(1, len(ticks)), 7))
    for a, b in zip([0, *cuts], [*cuts, len(ticks)]):
        parts.on_ticks(ticks.slice(a, b))
    parts.finish()
    assert parts.ledger.to_jsonl() == reference_ledger(session, ticks, text, cfg)


def test_same_input_twice_gives_the_same_bytes() -> None:
    session, ticks, text, cfg = random_case(random.Random(99))
    runs = [armed(session, text, cfg).run(ticks).to_jsonl() for _ in range(2)]
    assert runs[0] == runs[1]
    assert Ledger.from_jsonl(runs[0]).to_jsonl() == runs[0]


@pytest.mark.parametrize("seed", range(100, 110))
def test_mixing_paths_across_batches_matches_one_reference_run(seed: int) -> None:
    """fast run, reference batch, fast run again: the same ledger as one reference run
    (after a fast run the reference re-warms indicators and crosses from the history)."""
    rng = random.Random(seed)
    session, ticks, text, cfg = random_case(rng)
    mixed = armed(session, text, cfg)
    a, b = sorted(rng.sample(range(1, len(ticks)), 2))
    mixed.run(ticks.slice(0, a), final=False)
    assert mixed.last_path == "fast"
    mixed.on_ticks(ticks.slice(a, b))
    mixed.run(ticks.slice(b, len(ticks)))
    assert mixed.ledger.to_jsonl() == reference_ledger(session, ticks, text, cfg)


@pytest.mark.parametrize("seed", range(200, 210))
def test_plan_armed_mid_session_same_on_both_paths(seed: int) -> None:
    rng = random.Random(seed)
    session, ticks, text, cfg = random_case(rng)
    cut = rng.randrange(1, len(ticks) - 1)
    out = []
    for path in ("reference", "auto"):
        e = Engine(cfg, session, "TEST", 0.01)
        e.on_ticks(ticks.slice(0, cut))
        e.arm(plan(text))
        live = armed_at(session, text, int(ticks.ts[cut - 1]))
        expected = expected_path(text) if path == "auto" and live else "reference"
        e.run(ticks.slice(cut, len(ticks)), path=path)
        assert e.last_path == expected
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]


@pytest.mark.parametrize("seed", range(300, 340))
def test_segmented_run_equals_on_ticks_with_supersede_and_stand_down(seed: int) -> None:
    """The session runner's pattern: arm at a cutoff, `run(segment, final=False)` to the
    next cutoff, then supersede (arm a new plan), stand down or keep, and run on. The
    ledger equals feeding the same segments to `on_ticks` with the same steps between."""
    rng = random.Random(seed)
    session, ticks = (realistic_day if seed % 4 == 0 else random_day)(rng)
    cfg = random_config(rng)
    n = len(ticks)
    cuts = sorted(rng.sample(range(1, n), rng.randrange(2, 6)))
    steps: list[str | None] = []
    for k in range(len(cuts) + 1):
        r = rng.random()
        steps.append(random_plan_text(rng).replace("PLAN r", f"PLAN p{k}") if k == 0 or r < 0.5
                     else "" if r < 0.8 else None)  # "" stands down, None keeps the plan
    out = []
    paths: list[str] = []
    for mode in ("on_ticks", "run"):
        e = Engine(cfg, session, "TEST", 0.01)
        for (a, b), step in zip(zip([0, *cuts], [*cuts, n]), steps):
            if step:
                e.arm(plan(step))
            elif step == "":
                e.stand_down("stand down at the cutoff")
            if mode == "on_ticks":
                e.on_ticks(ticks.slice(a, b))
            else:
                e.run(ticks.slice(a, b), final=False)
                paths.append(e.last_path)
        e.finish()
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]
    assert paths[0] == expected_path(steps[0] or "")


# the bench's honest workloads (bench/engine_throughput.py): rules that fire all day, and a
# rich 8-rule plan; the fast path must equal the reference under every policy
REARMING = (
    "PLAN rearm RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, 50) AND pos <= 0: BUY 100 MKT STOP -0.5% TARGET +1% x100\n"
    "WHEN mid CROSSES BELOW sma(mid, 50) AND pos > 0: FLAT x100"
)
POLICIES = {
    "default": FastPolicy(),
    "small_steps": FastPolicy(first_prefix=40, first_chunk=3),
    "hand_over_mid_batch": FastPolicy(first_prefix=100, max_columns_ticks=800),
    "hand_over_at_once": FastPolicy(max_columns_mb=1e-6),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("workload", ["all_day", "rich", "rearming"])
def test_dense_workloads_match_reference_under_every_policy(workload: str, policy: str) -> None:
    text = {"all_day": ALL_DAY, "rich": RICH, "rearming": REARMING}[workload]
    rng = random.Random(17)
    for k, make in enumerate((realistic_day, random_day, realistic_day)):
        session, ticks = make(rng)
        cfg = EngineConfig(maxorders=5000) if k != 2 else random_config(rng)
        ref = reference_ledger(session, ticks, text, cfg)
        handed_over = 0
        for segments in (1, 5):
            e = armed(session, text, cfg)
            e.fast_policy = POLICIES[policy]
            n = len(ticks)
            step = -(-n // segments)
            for a in range(0, n, step):
                live = e.fast_applies()  # once the plan is spent or disarmed: the broker only
                e.run(ticks.slice(a, min(n, a + step)), path="fast" if live else "auto",
                      final=False)
                assert e.last_path == ("fast" if live else "reference")
                handed_over += e.fast_stats.handed_over
            e.finish()
            assert e.ledger.to_jsonl() == ref, (workload, policy, k, segments)
        if k == 0:  # the policies really take (or avoid) the hand-over
            assert bool(handed_over) == policy.startswith("hand_over"), (policy, handed_over)
        if k == 0:
            assert ref.count(b'"fill"') >= 20  # the workload really trades all day
