"""Benchmark the frame: briefing time on the sample day, tokens per pane, and freezing a
30-day 1-second-tick history.

Prints one JSON line. Ratios compare against references measured in the same run:
- `freeze_speedup_vs_copy`: copying the history's arrays up to the cutoff (what a copying
  snapshot would cost) divided by `freeze` (which takes read-only views);
- `briefing_speedup_vs_full_aggregation`: aggregating the whole visible history into 5m bars
  (what a pane would cost without windowed slicing) divided by one full default briefing.
Usage: python bench/panes.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.data import SyntheticSpec, generate, load_sample  # noqa: E402
from kestrel.frame import Ordinal, briefing, default_view, estimate_tokens, freeze  # noqa: E402
from kestrel.frame.bars import time_bars  # noqa: E402
from kestrel.frame.catalog import DEFAULT_CATALOG  # noqa: E402


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, 10-day history")
    args = ap.parse_args()
    reps = 20 if args.quick else 200
    days = 10 if args.quick else 30

    data = load_sample()
    session = data.sessions[-1]
    at = session.wall_clock_ns(10, 30)
    ordinal = Ordinal(1, "10:30", at)
    snap = freeze(data, at)
    view = default_view(ordinal)
    brief_ms = median_ms(lambda: briefing(snap, ordinal, view, {"budget": "tokens 8000 views 3"}), reps)
    full_ms = median_ms(lambda: time_bars(snap.ticks, 300, snap.utc_offset_ns), reps)
    tokens = {}
    for p in view.panes:
        spec = DEFAULT_CATALOG.get(p.name)
        assert spec is not None
        tokens[p.name] = estimate_tokens(spec.builder(snap, dict(p.args)))
    text = briefing(snap, ordinal, view, {"budget": "tokens 8000 views 3"})

    t0 = time.perf_counter()
    hist = generate(SyntheticSpec(sessions=days), 1)
    gen_s = time.perf_counter() - t0
    cut = hist.sessions[-1].wall_clock_ns(10, 30)
    freeze_ms = median_ms(lambda: freeze(hist, cut), reps)
    k = hist.ticks.index_at(cut)

    def copy_all() -> None:
        t = hist.ticks
        for a in (t.ts, t.bid, t.ask, t.last, t.size):
            np.array(a[:k], copy=True)

    copy_ms = median_ms(copy_all, max(5, reps // 10))
    frozen = freeze(hist, cut)
    shares = bool(np.shares_memory(frozen.ticks.last, hist.ticks.last))

    print(json.dumps({
        "briefing_ms_median": round(brief_ms, 4),
        "briefing_tokens": estimate_tokens(text),
        "briefing_speedup_vs_full_aggregation": round(full_ms / brief_ms, 2),
        "tokens_per_pane": tokens,
        "freeze_ms_median": round(freeze_ms, 4),
        "freeze_history_ticks": len(hist.ticks),
        "freeze_history_sessions": days,
        "freeze_copy_reference_ms": round(copy_ms, 4),
        "freeze_speedup_vs_copy": round(copy_ms / freeze_ms, 2),
        "freeze_shares_memory": shares,
        "generate_history_s": round(gen_s, 3),
        "quick": args.quick,
    }))


if __name__ == "__main__":
    main()
