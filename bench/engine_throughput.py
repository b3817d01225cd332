"""Engine throughput on synthetic quote ticks: reference path, fast path, a hand-written floor.

Prints one JSON line:
- `reference_ticks_per_s` / `fast_ticks_per_s`: ticks/s over the typical plans (an opening
  range breakout with a bracket, an SMA/mid cross with a trailing stop, a mean-reversion
  limit entry with a bracket and TTL), total ticks / total wall time, one engine per session;
- `python_floor_ticks_per_s`: a hand-written pure-Python loop computing the SMA(50)/mid
  cross with a 0.5%/1% bracket (no framework) on the same ticks, stopping each session as
  soon as its single trade is done;
- `reference_vs_python_floor` / `fast_vs_python_floor`: the engine's ticks/s on that same
  SMA-cross-with-bracket plan over the floor's;
- `backtrader_ratio` (when backtrader is installed): backtrader's wall time on the
  SMA-bracket workload (`FLOOR_PLAN`) over the same ticks, fed one bar per tick
  (`backtrader_bars` is the number of ticks fed), over the engine's reference wall time on
  it; the `*_ratio_fast` keys use the fast path's wall time. `backtrader_trades_match`: its
  round trips (`backtrader_round_trips`) are the engine's (`engine_round_trips`): same entry
  and exit timestamps and sides, prices within half a tick; `backtrader_mismatch` says what
  differs ('' when nothing). bench/peers.py holds both peers and how they mirror the engine;
- `armed_all_day_*_ticks_per_s`: a plan whose rule stays armed all day (it never fires),
  so the reference path evaluates its indicators and condition on every tick;
  `python_per_tick_loop_ticks_per_s`: a pure-Python loop over every tick (SMA cross with
  bracket, re-entering when flat) and `armed_all_day_reference_vs_per_tick_loop` the ratio;
- `nautilus_ratio` (when nautilus_trader is installed): NautilusTrader's BacktestEngine wall
  time on the same workload over the same quote ticks (its SMA computed in the strategy,
  first cross per session, the entry on the next tick, a stop-market and a limit from the
  entry's fill price, the flatten on the session's last tick), over the engine's reference
  wall; `nautilus_trades_match` / `nautilus_round_trips` / `nautilus_mismatch` as for
  backtrader. Each peer's wall is the best of `repeats` runs (their fills must not vary);
- `segmented_vs_single_ratio`: on one long session (a fifth of the ticks), the wall time of
  `run(segment, final=False)` over `segments` (200) equal segments then `finish()` (the
  session runner's pattern) over one `run` of the whole session, for the armed-all-day plan
  (`_rearming`: an SMA cross that trades and re-arms all day; `_typical`: the SMA cross with a
  trailing stop, spent after its first fire); `single_call_s*` the one-call wall times;
- `ledgers_identical`: the fast path's ledgers equal the reference's, byte for byte (and the
  segmented runs' equal the single calls');
- `peak_rss_mb`: peak resident memory of the process before the peers run
  (`peak_rss_mb_with_peers` after them). Peers that are not installed are skipped.

Honest workloads, reported separately:
- `all_day_*_ticks_per_s`: a bracket entry that re-enters on every SMA cross while flat and
  a FLAT on the cross back (x100 each), on sessions of 25,000 ticks: it trades all day
  (`all_day_fills` fills); `rich_*_ticks_per_s`: an 8-rule plan (crosses, breakouts with
  limit entries and TTL, ema/sma exits, momentum with a trailing stop, a time exit);
  `rearming_*`: the SMA cross in and out (`REARMING`);
- `examples_*_ticks_per_s` and `examples`: every plan of examples/*.kes on the same ticks
  (fast = the `auto` path: the reference where the fast path does not apply);
- `real_*`: the OANDA EUR/USD fortnight from ../shared/data (`real_data: "absent"` when
  the data is not there), FX plans, per session;
- `fast_vs_reference_min`: the smallest fast/reference speed ratio over every workload
  where the fast path applies (`fast_vs_reference` lists them);
- `long_session_*`: one generated 24-hour session (10M ticks; 1M with --quick) run with the
  rich plan in a fresh subprocess per path: its peak RSS (`ru_maxrss`) and the size of the
  frozen tick columns it holds (`long_session_data_mb`);
- `vs_nautilus_reference` / `vs_nautilus_fast`: NautilusTrader's wall time over the
  engine's on the SMA-bracket workload (same quote ticks, a Python strategy), with
  `nautilus_trades` / `engine_trades` (signals fired) and `nautilus_entries_match` (same
  signal ticks), and `nautilus_trades_match` (same entries and exits, above).
- `engine_lines`: lines of the engine package (kestrel/engine/*.py); `function_lines`: of the
  language's function units the engine runs (kestrel/lang/functions.py, windows.py, means.py,
  operations.py), and their sum.
`--quick` uses 200,000 ticks instead of 1,000,000.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.engine import Engine, EngineConfig  # noqa: E402
from kestrel.market.session import SessionSpec  # noqa: E402
from kestrel.market.ticks import Ticks  # noqa: E402
from kestrel.lang import Plan, parse  # noqa: E402

from bench import peers  # noqa: E402
from bench.workloads import ALL_DAY, RICH, example_plans  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FX_PLANS = (
    "PLAN fxday RISK maxpos 100000\n"
    "WHEN mid CROSSES ABOVE sma(mid, 100) AND pos <= 0: BUY 10000 MKT STOP -0.05% TARGET +0.05% x100\n"
    "WHEN mid CROSSES BELOW sma(mid, 100) AND pos > 0: FLAT x100",
    "PLAN fxbrk RISK maxpos 100000\n"
    "WHEN last > high(30m) AND spread < 0.0003: BUY 10000 LMT ask STOP -0.1% TARGET +0.1% TTL 5m x20\n"
    "WHEN last < low(30m) AND spread < 0.0003: SELL 10000 LMT bid STOP +0.1% TARGET -0.1% TTL 5m x20",
)
OANDA = "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
ALL_DAY_SESSION_TICKS = 25_000

SESSIONS = 40
TYPICAL = {
    "orb_bracket": "PLAN orb RISK maxpos 100\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5% TARGET +1%",
    "sma_cross_trail": "PLAN smax RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, 50): BUY 100 MKT TRAIL 0.5%",
    "mean_reversion_limit": "PLAN mr RISK maxpos 100\n"
    "WHEN last < vwap - 0.4 AND spread <= 0.02: BUY 100 LMT bid-0.02 STOP -0.5% TARGET +0.5% TTL 10m",
}
ARMED_ALL_DAY = (
    "PLAN idle RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, 50) AND spread > 5: BUY 100 MKT STOP -0.5% TARGET +1%"
)
# fires and re-arms all day: the fast path evaluates its rules in every segment
REARMING = (
    "PLAN rearm RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, 50) AND pos <= 0: BUY 100 MKT STOP -0.5% TARGET +1% x100\n"
    "WHEN mid CROSSES BELOW sma(mid, 50) AND pos > 0: FLAT x100"
)
SEGMENTS = 200
REPEATS = 3  # every timed path (ours and the references) is the best of this many runs
FLOOR_PLAN = "PLAN smab RISK maxpos 100\nWHEN mid CROSSES ABOVE sma(mid, 50): BUY 100 MKT STOP -0.5% TARGET +1%"


def make_days(total: int, seed: int = 11, sessions: int = SESSIONS) -> list[tuple[SessionSpec, Ticks]]:
    """Seeded random-walk quote ticks: `total` ticks over `sessions` sessions 09:30-16:00."""
    rng = np.random.default_rng(seed)
    per = total // sessions
    days = []
    date = dt.date(2024, 1, 2)
    price = 10000.0  # in cents
    for _ in range(sessions):
        while date.weekday() >= 5:
            date += dt.timedelta(days=1)
        s = SessionSpec.us_equity(date)
        span = s.close_ns - s.open_ns
        ts = s.open_ns + (np.arange(per, dtype=np.int64) * (span // per))
        steps = rng.choice(np.array([-1.0, 0.0, 1.0]), per, p=[0.25, 0.5, 0.25])
        bid_c = np.round(price + np.cumsum(steps))
        price = float(bid_c[-1])
        spread = rng.choice(np.array([1.0, 2.0]), per, p=[0.8, 0.2])
        days.append((s, Ticks.from_arrays(ts, bid_c / 100.0, (bid_c + spread) / 100.0)))
        date += dt.timedelta(days=1)
    return days


def plan_of(text: str) -> Plan:
    p = parse(text)
    assert isinstance(p, Plan)
    return p


def run_engines(days: list[tuple[SessionSpec, Ticks]], plan: Plan, paths: tuple[str, str],
                cfg: EngineConfig | None = None, symbol: str = "SYN", tick_size: float = 0.01,
                repeats: int = REPEATS) -> tuple[tuple[float, list[bytes]], tuple[float, list[bytes]]]:
    """For each of the two `paths`, the best wall time of `repeats` runs over every session (a
    fresh engine per session, the plan armed at its start) and the ledgers of its last run.
    The paths' runs alternate (a, b, a, b, ...), so a slow stretch of the shared machine
    weighs on both alike: their ratio is the figure to trust."""
    cfg = cfg or EngineConfig()
    best = {p: float("inf") for p in paths}
    out: dict[str, list[bytes]] = {p: [] for p in paths}
    for _ in range(repeats):
        for path in paths:
            ledgers = []
            t0 = time.perf_counter()
            for session, ticks in days:
                e = Engine(cfg, session, plan.instrument or symbol, tick_size)
                e.arm(plan)
                e.run(ticks, path=path)
                assert e.last_path == path or path == "auto"
                ledgers.append(e.ledger.to_jsonl())
            best[path] = min(best[path], time.perf_counter() - t0)
            out[path] = ledgers
    a, b = paths
    return (best[a], out[a]), (best[b], out[b])


def best_wall(fn: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    """The best of REPEATS runs of a reference loop returning (wall, count)."""
    runs = [fn() for _ in range(REPEATS)]
    return min(runs, key=lambda r: r[0])


def segmented_walls(day: tuple[SessionSpec, Ticks], plan: Plan, segments: int) -> tuple[float, float, bool]:
    """Wall time of one `run(day)` and of `run(segment, final=False)` over `segments` equal
    segments then `finish()` (the session runner's pattern), on the auto path; and whether the
    two ledgers are identical."""
    session, ticks = day
    n = len(ticks)
    cfg = EngineConfig(maxorders=100_000)
    e = Engine(cfg, session, "SYN", 0.01)
    e.arm(plan)
    t0 = time.perf_counter()
    e.run(ticks)
    one = time.perf_counter() - t0
    m = Engine(cfg, session, "SYN", 0.01)
    m.arm(plan)
    step = -(-n // segments)
    t0 = time.perf_counter()
    for a in range(0, n, step):
        m.run(ticks.slice(a, min(n, a + step)), final=False)
    m.finish()
    many = time.perf_counter() - t0
    return one, many, e.ledger.to_jsonl() == m.ledger.to_jsonl()


def floor_loop(days: list[tuple[SessionSpec, Ticks]]) -> tuple[float, int]:
    """The no-framework floor, written as tightly as a hand-coder would: per session, scan
    for the first SMA(50)-of-mid cross above, buy 100 at the next tick's ask, then scan the
    bids for the -0.5% stop / +1% target (first hit exits), else exit at the last bid; stop
    as soon as the trade is done (the engine's plan is single-shot too)."""
    t0 = time.perf_counter()
    trades = 0
    for _session, ticks in days:
        bids = ticks.bid.tolist()
        asks = ticks.ask.tolist()
        n = len(bids)
        n_sma = 50
        window = [0.0] * n_sma
        acc = 0.0
        prev_mid = prev_sma = float("nan")
        fire = -1
        for k in range(n):
            m = (bids[k] + asks[k]) / 2.0
            j = k % n_sma
            acc += m - window[j]
            window[j] = m
            if k + 1 >= n_sma:
                sma = acc / n_sma
                if prev_mid <= prev_sma and m > sma:
                    fire = k
                    break
                prev_mid, prev_sma = m, sma
        if fire < 0 or fire + 1 >= n:
            continue
        entry = asks[fire + 1]
        stop = entry * 0.995
        target = entry * 1.01
        trades += 1
        for k in range(fire + 2, n):
            b = bids[k]
            if b <= stop or b >= target:
                break
    return time.perf_counter() - t0, trades


def per_tick_loop(days: list[tuple[SessionSpec, Ticks]]) -> tuple[float, int]:
    """A pure-Python per-tick loop over every tick: SMA(50)-of-mid cross above -> buy 100 at
    the next ask, -0.5%/+1% bracket on the bid, re-entering on the next cross once flat."""
    t0 = time.perf_counter()
    trades = 0
    for _session, ticks in days:
        bids = ticks.bid.tolist()
        asks = ticks.ask.tolist()
        n_sma = 50
        window = [0.0] * n_sma
        acc = 0.0
        count = 0
        prev_mid = prev_sma = float("nan")
        state = 0  # 0 flat, 1 entry pending, 2 long
        stop = target = 0.0
        for k in range(len(bids)):
            b = bids[k]
            a = asks[k]
            if state == 1:
                stop = a * 0.995
                target = a * 1.01
                state = 2
            elif state == 2 and (b <= stop or b >= target):
                trades += 1
                state = 0
            m = (b + a) / 2.0
            j = count % n_sma
            acc += m - window[j]
            window[j] = m
            count += 1
            if count >= n_sma:
                sma = acc / n_sma
                if state == 0 and prev_mid <= prev_sma and m > sma:
                    state = 1
                prev_mid, prev_sma = m, sma
    return time.perf_counter() - t0, trades


def source_lines() -> dict[str, int]:
    """Lines of the engine package (`engine_lines`) and of the language's function units it
    runs (`function_lines`: kestrel/lang/functions.py, windows.py, means.py, operations.py), and
    their sum."""

    def lines(package: Path) -> int:
        return sum(len(p.read_text().splitlines()) for p in package.glob("*.py"))

    engine = lines(ROOT / "kestrel" / "engine")
    functions = sum(len((ROOT / "kestrel" / "lang" / f"{name}.py").read_text().splitlines())
                    for name in ("functions", "windows", "means", "operations"))
    return {"engine_lines": engine, "function_lines": functions,
            "engine_and_function_lines": engine + functions}


def shared_data_dir() -> Path | None:
    """../shared/data from the repo root (or $KESTREL_SHARED_DATA), when present."""
    env = os.environ.get("KESTREL_SHARED_DATA")
    for cand in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "data"]:
        if (cand / OANDA).exists():
            return cand
    return None


def long_session(n: int, seed: int = 31) -> tuple[SessionSpec, Ticks]:
    """One generated 24-hour session of n quote ticks (a random walk on a 0.01 grid), built
    in chunks so the generator itself holds little beyond the five columns."""
    rng = np.random.default_rng(seed)
    s = SessionSpec.around_the_clock(dt.date(2024, 3, 5))
    span = s.close_ns - s.open_ns
    ts = s.open_ns + (np.arange(n, dtype=np.int64) * (span // n))
    bid = np.empty(n)
    ask = np.empty(n)
    price = 10000.0
    step = 1 << 20
    for lo in range(0, n, step):
        k = min(n, lo + step) - lo
        walk = price + np.cumsum(rng.choice(np.array([-1.0, 0.0, 1.0]), k, p=[0.25, 0.5, 0.25]))
        price = float(walk[-1])
        bid[lo:lo + k] = walk / 100.0
        ask[lo:lo + k] = (walk + rng.choice(np.array([1.0, 2.0]), k, p=[0.8, 0.2])) / 100.0
    return s, Ticks(ts, bid, ask, (bid + ask) / 2.0, np.zeros(n))


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (the exec'd image's own high-water mark; `ru_maxrss`
    of a subprocess also counts the parent's RSS at the fork), else `ru_maxrss`."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def long_child(path: str, data_dir: str) -> None:
    """Subprocess body: load the frozen columns, run the rich plan on `path`, print peak RSS."""
    cols = {k: np.load(os.path.join(data_dir, k + ".npy")) for k in ("ts", "bid", "ask", "last", "size")}
    ticks = Ticks(cols["ts"], cols["bid"], cols["ask"], cols["last"], cols["size"])
    for a in cols.values():
        a.flags.writeable = False
    session = SessionSpec.around_the_clock(dt.date(2024, 3, 5))
    data_mb = sum(a.nbytes for a in cols.values()) / 2**20
    e = Engine(EngineConfig(maxorders=5000), session, "SYN", 0.01)
    e.arm(plan_of(RICH))
    t0 = time.perf_counter()
    e.run(ticks, path=path)
    wall = time.perf_counter() - t0
    print(json.dumps({"peak_mb": peak_rss_mb(),
                      "data_mb": data_mb, "wall": wall, "events": len(e.ledger)}))


def long_session_rss(n: int) -> dict[str, object]:
    """Peak RSS of one long session per path, each in a fresh subprocess."""
    out: dict[str, object] = {"long_session_ticks": n}
    session, ticks = long_session(n)
    with tempfile.TemporaryDirectory() as tmp:
        for k in ("ts", "bid", "ask", "last", "size"):
            np.save(os.path.join(tmp, k + ".npy"), getattr(ticks, k))
        del ticks
        for path in ("reference", "fast"):
            res = subprocess.run([sys.executable, __file__, "--long-child", path, tmp],
                                 capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            out[f"long_session_peak_rss_mb_{path}"] = round(r["peak_mb"], 1)
            out[f"long_session_ticks_per_s_{path}"] = round(n / r["wall"])
            out["long_session_data_mb"] = round(r["data_mb"], 1)
    return out


def real_data(quick: bool) -> dict[str, object]:
    """The OANDA EUR/USD fortnight (or `real_data: "absent"`): FX plans, per session, both
    paths; ledgers compared."""
    base = shared_data_dir()
    if base is None:
        return {"real_data": "absent"}
    from kestrel.data import load_market_data

    data = load_market_data(base / OANDA)
    days = []
    for session in data.sessions[: 3 if quick else None]:
        day = data.ticks.between(session.open_ns, session.close_ns)
        if len(day):
            days.append((session, day))
    n = sum(len(t) for _, t in days)
    cfg = EngineConfig(maxpos=100_000, maxloss=5000, maxorders=5000)
    ref = fast = 0.0
    same = True
    for text in FX_PLANS:
        p = plan_of(text)
        (rw, rl), (fw, fl) = run_engines(days, p, ("reference", "fast"), cfg, data.symbol, data.tick_size)
        same &= rl == fl
        ref += rw
        fast += fw
    return {"real_data": OANDA, "real_ticks": n, "real_sessions": len(days),
            "real_reference_ticks_per_s": round(len(FX_PLANS) * n / ref),
            "real_fast_ticks_per_s": round(len(FX_PLANS) * n / fast),
            "real_ledgers_identical": same}


def main() -> None:
    parser = argparse.ArgumentParser(description="engine throughput")
    parser.add_argument("--quick", action="store_true", help="200,000 ticks instead of 1,000,000")
    parser.add_argument("--long-child", nargs=2, metavar=("PATH", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.long_child:
        long_child(*args.long_child)
        return
    total = 200_000 if args.quick else 1_000_000
    days = make_days(total)
    n = sum(len(t) for _, t in days)
    result: dict[str, object] = {
        "bench": "engine_throughput", "quick": args.quick, "ticks": n, "repeats": REPEATS,
        **source_lines(),
    }
    ref_wall = fast_wall = 0.0
    identical = True
    per_plan: dict[str, dict[str, float]] = {}
    for name, text in TYPICAL.items():
        p = plan_of(text)
        (rw, rl), (fw, fl) = run_engines(days, p, ("reference", "fast"))
        identical &= rl == fl
        ref_wall += rw
        fast_wall += fw
        per_plan[name] = {"reference_ticks_per_s": round(n / rw), "fast_ticks_per_s": round(n / fw)}
    result["reference_ticks_per_s"] = round(len(TYPICAL) * n / ref_wall)
    result["fast_ticks_per_s"] = round(len(TYPICAL) * n / fast_wall)
    floor_plan = plan_of(FLOOR_PLAN)
    (sma_ref_wall, rl), (sma_fast_wall, fl) = run_engines(days, floor_plan, ("reference", "fast"))
    identical &= rl == fl
    floor_wall, _trades = best_wall(lambda: floor_loop(days))
    result["python_floor_ticks_per_s"] = round(n / floor_wall)
    result["sma_bracket_reference_ticks_per_s"] = round(n / sma_ref_wall)
    result["sma_bracket_fast_ticks_per_s"] = round(n / sma_fast_wall)
    result["reference_vs_python_floor"] = round(floor_wall / sma_ref_wall, 3)
    result["fast_vs_python_floor"] = round(floor_wall / sma_fast_wall, 3)
    idle = plan_of(ARMED_ALL_DAY)
    (idle_ref_wall, rl), (idle_fast_wall, fl) = run_engines(days, idle, ("reference", "fast"))
    identical &= rl == fl
    result["armed_all_day_reference_ticks_per_s"] = round(n / idle_ref_wall)
    result["armed_all_day_fast_ticks_per_s"] = round(n / idle_fast_wall)
    loop_wall, _ = best_wall(lambda: per_tick_loop(days))
    result["python_per_tick_loop_ticks_per_s"] = round(n / loop_wall)
    result["armed_all_day_reference_vs_per_tick_loop"] = round(loop_wall / idle_ref_wall, 3)
    # one long session (a fifth of the ticks) in 1 call vs SEGMENTS calls
    seg_day = make_days(n // 5, seed=12, sessions=1)[0]
    result["segmented_ticks"] = len(seg_day[1])
    result["segments"] = SEGMENTS
    for key, text in (("segmented_vs_single_ratio", ARMED_ALL_DAY),
                      ("segmented_vs_single_ratio_rearming", REARMING),
                      ("segmented_vs_single_ratio_typical", TYPICAL["sma_cross_trail"])):
        one, many, same = segmented_walls(seg_day, plan_of(text), SEGMENTS)
        identical &= same
        result[key] = round(many / one, 3)
        result[key.replace("segmented_vs_single_ratio", "single_call_s")] = round(one, 4)
    # honest workloads: trading all day, rich plans, the example corpus, real data
    ratios: dict[str, float] = {
        "typical": round(ref_wall / fast_wall, 3),
        "sma_bracket": round(sma_ref_wall / sma_fast_wall, 3),
        "armed_all_day": round(idle_ref_wall / idle_fast_wall, 3),
    }
    day_days = make_days(n, seed=13, sessions=max(1, n // ALL_DAY_SESSION_TICKS))
    dense_cfg = EngineConfig(maxorders=5000)
    for key, text in (("all_day", ALL_DAY), ("rich", RICH), ("rearming", REARMING)):
        p = plan_of(text)
        (rw, rl), (fw, fl) = run_engines(day_days, p, ("reference", "fast"), dense_cfg)
        identical &= rl == fl
        result[f"{key}_reference_ticks_per_s"] = round(n / rw)
        result[f"{key}_fast_ticks_per_s"] = round(n / fw)
        result[f"{key}_fills"] = sum(led.count(b'"event":"fill"') for led in rl)
        ratios[key] = round(rw / fw, 3)
    ex_days = days[: max(1, len(days) // (8 if args.quick else 4))]
    ex_n = sum(len(t) for _, t in ex_days)
    examples: dict[str, dict[str, object]] = {}
    ex_ref = ex_auto = 0.0
    for name, p in example_plans():
        (rw, rl), (aw, al) = run_engines(ex_days, p, ("reference", "auto"))
        identical &= rl == al
        ex_ref += rw
        ex_auto += aw
        probe = Engine(EngineConfig(), ex_days[0][0], p.instrument or "SYN", 0.01)
        probe.arm(p)
        fast = probe.fast_applies()
        examples[name] = {"reference_ticks_per_s": round(ex_n / rw),
                          "auto_ticks_per_s": round(ex_n / aw), "fast_applies": fast}
        if fast:
            ratios["example:" + name] = round(rw / aw, 3)
    result["examples_ticks"] = ex_n
    result["examples_reference_ticks_per_s"] = round(len(examples) * ex_n / ex_ref)
    result["examples_fast_ticks_per_s"] = round(len(examples) * ex_n / ex_auto)
    result["examples"] = examples
    real = real_data(args.quick)
    result.update(real)
    if "real_reference_ticks_per_s" in real:
        ratios["real"] = round(int(real["real_fast_ticks_per_s"]) / int(real["real_reference_ticks_per_s"]), 3)  # type: ignore[call-overload]
        identical &= bool(real["real_ledgers_identical"])
    result["fast_vs_reference"] = ratios
    result["fast_vs_reference_min"] = min(ratios.values())
    result.update(long_session_rss(1_000_000 if args.quick else 10_000_000))
    # our peak memory, before the peers load their frameworks and data
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    # the peers, their trades checked against the engine's (bench/peers.py)
    signals, fills = peers.engine_fills(days, floor_plan)
    ours = peers.round_trips(fills)
    result["engine_trades"] = len(signals)
    result["engine_round_trips"] = len(ours)
    # each peer's ratios are over the engine's walls measured right beside it (a peer's run comes
    # many minutes after the engine's first measures, and the shared machine's load moves)
    bt_run = peers.best_run(peers.backtrader_run, days, REPEATS)
    if bt_run is not None:
        (near_ref, _), (near_fast, _) = run_engines(days, floor_plan, ("reference", "fast"))
        result.update(peers.peer_keys("backtrader", bt_run, ours, near_ref, near_fast))
        result["backtrader_bars"] = bt_run.ticks  # one bar per tick
    nt = peers.best_run(peers.nautilus_run, days, REPEATS)
    if nt is not None:
        (near_ref, _), (near_fast, _) = run_engines(days, floor_plan, ("reference", "fast"))
        result.update(peers.peer_keys("nautilus", nt, ours, near_ref, near_fast))
        result["nautilus_ticks_per_s"] = round(n / nt.wall)
        result["vs_nautilus_reference"] = result["nautilus_ratio"]
        result["vs_nautilus_fast"] = result["nautilus_ratio_fast"]
        result["nautilus_trades"] = len(nt.signals)
        result["nautilus_entries_match"] = sorted(nt.signals) == sorted(signals)
    result["ledgers_identical"] = identical
    result["per_plan"] = per_plan
    result["peak_rss_mb_with_peers"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
