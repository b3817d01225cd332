"""Differential test: the fast path's ledger equals the reference path's, byte for byte,
over seeded random plans x random days (240 pairs; half the days are full 6.5-hour
sessions from the data generator with price jumps and halts). Also: the reference ledger does not
depend on how the ticks are split into batches, and two runs give the same bytes."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import numpy as np
import pytest

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig, Ledger
from kestrel.engine.history import TickHistory
from kestrel.engine.ledger import (
    Cancelled,
    Disarmed,
    Filled,
    Fired,
    LedgerEvent,
    OrderPlaced,
    OrderRejected,
)
from kestrel.frame.session import SessionSpec
from kestrel.frame.ticks import Ticks

from test_engine_helpers import plan

N_CASES = 240


def realistic_day(rng: random.Random) -> tuple[SessionSpec, Ticks]:
    """A full 6.5-hour session from the data generator (23,400 ticks about 1 s apart,
    U-shaped volatility, Poisson price jumps, spread widening), sometimes with a trading
    halt: a 5-40 minute stretch without ticks, across which the price gaps."""
    spec = SyntheticSpec(sessions=1, start_price=rng.choice([25.0, 180.0, 950.0]),
                         jumps_per_session=rng.choice([3.0, 12.0]),
                         daily_vol=rng.choice([0.01, 0.03]))
    md = generate(spec, rng.randrange(2**32))
    ticks = md.ticks
    if rng.random() < 0.5:
        a = rng.randrange(2000, len(ticks) - 3000)
        b = a + 60 * rng.randrange(5, 40)
        joined = TickHistory()
        joined.append(ticks.slice(0, a))
        joined.append(ticks.slice(b, len(ticks)))
        ticks = joined.view()
    return md.sessions[0], ticks


def random_day(rng: random.Random) -> tuple[SessionSpec, Ticks]:
    """A random quote+trade day: 9:30 open, a close that may fall inside the data,
    timestamps with repeats, a random walk on a 0.01 grid with a few price jumps of
    10-60 ticks and a 2-20 minute silence, sizes with zeros."""
    close_min = rng.choice([45, 60, 90, 390])
    session = SessionSpec(dt.date(2024, 4, 8), dt.time(9, 30),
                          (dt.datetime(2024, 4, 8, 9, 30) + dt.timedelta(minutes=close_min)).time())
    nrng = np.random.default_rng(rng.randrange(2**32))
    n = rng.randrange(1500, 5000)
    gaps = nrng.exponential(rng.choice([0.5, 1.0, 2.0]), n) * 1e9
    gaps[nrng.random(n) < 0.1] = 0  # equal timestamps
    gaps[rng.randrange(1, n)] += rng.randrange(120, 1200) * 1e9  # a silence (not gaps[0]: dropped below)
    ts = session.open_ns + np.cumsum(gaps).astype(np.int64) - int(gaps[0])
    steps = nrng.choice([-1, 0, 1], n, p=[0.3, 0.4, 0.3]) * rng.choice([1, 2])
    for _ in range(rng.randrange(0, 4)):  # price jumps
        steps[rng.randrange(n)] += rng.choice([-1, 1]) * rng.randrange(10, 60)
    mid_ticks = 10000 + np.cumsum(steps)
    spread = nrng.integers(1, 4, n)
    bid = mid_ticks / 100.0
    ask = (mid_ticks + spread) / 100.0
    last = np.where(nrng.random(n) < 0.5, bid, ask)
    size = np.where(nrng.random(n) < 0.3, 0.0, nrng.integers(1, 20, n).astype(np.float64))
    return session, Ticks.from_arrays(ts, bid, ask, last, size)


def test_random_days_have_the_silence_they_promise() -> None:
    """The generator's 2-20 minute silence is really in the timestamps (it once was added
    after they were computed, so no day had one)."""
    for seed in range(40):
        _, ticks = random_day(random.Random(seed))
        longest = int(np.diff(ticks.ts).max())
        assert 120 * 10**9 <= longest < 1200 * 10**9 + 60 * 10**9, (seed, longest / 1e9)


def random_cond(rng: random.Random) -> str:
    def atom() -> str:
        k = rng.randrange(14)
        s = rng.choice([3, 5, 10, 30, 60, 120, 300, 1800])
        n = rng.choice([2, 3, 5, 10, 20])
        x = rng.choice([0.01, 0.02, 0.05, 0.1])
        if k == 0:
            return f"last > high({s}s)"
        if k == 1:
            return f"last < low({s}s)"
        if k == 2:
            return f"mid CROSSES {rng.choice(['ABOVE', 'BELOW'])} sma(mid, {n})"
        if k == 3:
            return f"last CROSSES {rng.choice(['ABOVE', 'BELOW'])} ema(last, {n})"
        if k == 4:
            return f"chg({s}s) {rng.choice(['>', '<'])} {rng.choice(['', '-'])}{x}"
        if k == 5:
            return f"range({s}s) > {x}"
        if k == 6:
            return f"spread {rng.choice(['<', '<=', '==', '!='])} {rng.choice([0.01, 0.02, 0.03])}"
        if k == 7:
            hh = rng.choice([9, 9, 10, 12, 15])
            return f"time >= {hh:02d}:{rng.randrange(30 if hh == 9 else 0, 60):02d}:{rng.randrange(60):02d}"
        if k == 8:
            return f"last {rng.choice(['>', '<'])} vwap {rng.choice(['+', '-'])} {x}"
        if k == 9:
            return f"last {rng.choice(['>', '<'])} open {rng.choice(['+', '-'])} {x}"
        if k == 10:
            tf = rng.choice([", 10s", ", 30s", ", 60s", ""])  # "" = the default 1m bars
            return f"atr({n}{tf}) > {x / 2}"
        if k == 11:
            return f"sma(last, {n}, {rng.choice([10, 30])}s) {rng.choice(['>', '<'])} mid"
        if k == 12:
            return f"ema(mid, {n}, 20s) CROSSES {rng.choice(['ABOVE', 'BELOW'])} vwap"
        return f"(ask - bid) / mid * 10000 < {rng.choice([1, 2, 3])}"

    a = atom()
    r = rng.random()
    if r < 0.15:
        # account state: pos and rpnl only change on fills (fast-path eligible)
        acct = rng.choice(["pos == 0", "pos > 0", "pos < 0", "pos != 0", f"rpnl < -{rng.choice([1, 5])}",
                           f"rpnl > {rng.choice([0, 2])}", f"pos * 2 >= {rng.choice([10, 20])}"])
        return f"{acct} AND {a}" if rng.random() < 0.7 else f"{a} OR {acct}"
    if r < 0.25:
        return f"{a} AND {atom()}"
    if r < 0.4:
        return f"{a} OR NOT {atom()}"
    return a


def random_action(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.08:
        return "FLAT"
    if r < 0.12:
        return "CANCEL"
    side = rng.choice(["BUY", "SELL"])
    sgn = -1 if side == "BUY" else 1
    qty = rng.randrange(1, 20)
    kind = rng.choice(["MKT", "MKT", "LMT", "STP"])
    if kind == "LMT":
        ref = "bid" if side == "BUY" else "ask"
        kind = f"LMT {ref}{'-' if side == 'BUY' else '+'}{rng.choice([0, 0.01, 0.02])}"
    elif kind == "STP":
        kind = f"STP {'ask+' if side == 'BUY' else 'bid-'}{rng.choice([0.01, 0.02, 0.05])}"
    out = f"{side} {qty} {kind}"
    if rng.random() < 0.6:
        out += f" STOP {'-' if sgn < 0 else '+'}{rng.choice([0.02, 0.05, 0.1])}%"
    if rng.random() < 0.5:
        out += f" TARGET {'+' if sgn < 0 else '-'}{rng.choice([0.03, 0.08, 0.2])}"
    if rng.random() < 0.3:
        out += f" TRAIL {rng.choice(['0.03', '0.05%', '0.1'])}"
    if rng.random() < 0.3:
        out += f" TTL {rng.choice([2, 10, 60])}s"
    return out


def random_plan_text(rng: random.Random) -> str:
    head = "PLAN r"
    e = rng.random()
    if e < 0.2:
        head += f" FOR {rng.choice([5, 20, 40])}m"
    elif e < 0.35:
        hh = rng.choice([9, 9, 11, 14])
        head += f" UNTIL {hh:02d}:{rng.randrange(35 if hh == 9 else 0, 60):02d}"
    risk = []
    if rng.random() < 0.7:
        risk.append(f"maxpos {rng.choice([20, 50, 200])}")
    if rng.random() < 0.7:
        risk.append(f"maxloss {rng.choice([2, 10, 50, 500])}")
    if rng.random() < 0.5:
        risk.append(f"maxorders {rng.choice([2, 5, 20])}")
    if risk:
        head += " RISK " + " ".join(risk)
    rules = []
    for _ in range(rng.randrange(1, 4)):
        acts = "; ".join(random_action(rng) for _ in range(rng.choice([1, 1, 2])))
        rep = f" x{rng.randrange(2, 6)}" if rng.random() < 0.5 else ""
        rules.append(f"WHEN {random_cond(rng)}: {acts}{rep}")
    return head + "\n" + "\n".join(rules)


def random_config(rng: random.Random) -> EngineConfig:
    return EngineConfig(
        maxpos=rng.choice([50, 1000]),
        maxloss=rng.choice([20.0, 1000.0]),
        maxorders=rng.choice([10, 50]),
        fee_per_unit=rng.choice([0.0, 0.005]),
        fee_per_order=rng.choice([0.0, 1.0]),
        slippage_ticks=rng.choice([0, 0, 1]),
        latency_ticks=rng.choice([0, 0, 1, 3]),
        latency_ns=rng.choice([0, 0, 250_000_000, 2_000_000_000]),
        end_of_day=rng.choice(["flatten", "carry"]),
        partial_fills=rng.random() < 0.3,
    )


def both_paths(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig) -> tuple[bytes, bytes]:
    fast = armed(session, text, cfg)
    assert fast.fast_applies()
    fast.run(ticks, path="auto")
    assert fast.last_path == "fast"
    return reference_ledger(session, ticks, text, cfg), fast.ledger.to_jsonl()


def test_fast_path_matches_reference_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    from kestrel.engine import fast as fast_module

    rng = random.Random(20261129)
    days = [f(rng) for _ in range(6) for f in (random_day, realistic_day)]
    total_fills = total_fired = 0
    seen: Counter[str] = Counter()
    for case in range(N_CASES):
        session, ticks = days[case % len(days)]
        text = random_plan_text(rng)
        cfg = random_config(rng)
        # odd cases: tiny prefixes and scan chunks, so prefix extension and chunk edges run
        monkeypatch.setattr(fast_module, "_FIRST_PREFIX", 40 if case % 2 else 4096)
        monkeypatch.setattr(fast_module, "_FIRST_CHUNK", 3 if case % 2 else 512)
        ref, fast = both_paths(session, ticks, text, cfg)
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
               "disarm:maxloss", "disarm:maxpos", "disarm:maxorders", "disarm:expired",
               "disarm:session", "reject:worst-case"}
    assert {k for k, v in seen.items() if v >= 2} >= wanted, wanted - set(seen)


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
            out["disarm:" + e.reason.split()[0]] += 1
        elif isinstance(e, OrderRejected):
            out["reject:" + e.reason.split()[0]] += 1
    return out


def random_case(rng: random.Random) -> tuple[SessionSpec, Ticks, str, EngineConfig]:
    session, ticks = random_day(rng)
    return session, ticks, random_plan_text(rng), random_config(rng)


def armed(session: SessionSpec, text: str, cfg: EngineConfig) -> Engine:
    e = Engine(cfg, session, "TEST", 0.01)
    e.arm(plan(text))
    return e


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
        expected = "fast" if path == "auto" and e.fast_applies() else "reference"
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
    assert paths[0] == ("fast" if armed(session, steps[0] or "", cfg).fast_applies() else "reference")
