"""Benchmark the frame: briefing time on the sample day, tokens per pane, and freezing a
30-day 1-second-tick history.

Prints one JSON line. Ratios compare against references measured in the same run:
- `freeze_speedup_vs_copy`: copying the history's arrays up to the cutoff (what a copying
  snapshot would cost) divided by `freeze` (which takes read-only views);
- `briefing_over_format_floor`: one full default briefing divided by the formatting floor,
  i.e. producing the byte-identical text with one `str.format` call from precomputed values
  (every number of the briefing extracted beforehand, asserted to round-trip exactly). It says
  how many times pure formatting the briefing costs: the rest is computing the values (bar
  aggregation, session slicing, levels, stats) and laying out the tables.
- `news_pane_us_median`: freezing the sample at 10:30 with a 20-symbol universe's 5,000
  headlines and rendering the news pane at its default arguments (`news_pane_tokens` its
  estimated tokens); `news_over_quote_pane`: that time over freezing and rendering the quote pane.
- `universe_briefing_tokens`: the default briefing (kernel panes and the default universe view:
  watchlist, portfolio, events) of the 20-symbol StockBench universe in o200k_base tokens
  (quicktok; `universe_tokenizer` names a documented proxy without it): the largest over every
  session's OPEN and CLOSE ordinal with all 20 symbols held (`universe_briefing_tokens_max`,
  target <= 1,500) and at the last session's OPEN with a flat account; `universe_briefing_ms_median`
  and `freeze_universe_ms_median` time them at the last session (null when the shared data is
  absent: KESTREL_SHARED_DATA or ../shared/data).
Usage: python bench/panes.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.data import SyntheticSpec, generate, load_sample  # noqa: E402
from kestrel.frame import Ordinal, briefing, default_view, estimate_tokens, freeze  # noqa: E402
from kestrel.frame.catalog import DEFAULT_CATALOG  # noqa: E402
from kestrel.frame.news import pane_news  # noqa: E402
from kestrel.market.data import MarketData  # noqa: E402
from kestrel.market.news import NewsFeed, NewsItem  # noqa: E402
from kestrel.market.ticks import NS_PER_S  # noqa: E402

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
_PROXY = re.compile(r"\w+|[^\w\s]")


def o200k() -> tuple[str, Callable[[str], int]]:
    """The bench's tokenizer: o200k_base (quicktok) or a documented proxy without it."""
    try:
        import quicktok  # type: ignore[import-untyped]
    except ImportError:
        return "proxy: word runs + punctuation characters (quicktok not installed)", lambda s: len(_PROXY.findall(s))
    enc = quicktok.get_encoding("o200k_base")
    return "o200k_base (quicktok, exact)", lambda s: len(enc.encode(s))


def universe_figures(reps: int, quick: bool) -> dict[str, object]:
    """The 20-symbol StockBench universe's default briefing: tokens (largest over the sessions,
    every symbol held; flat at the last OPEN) and times at the last session."""
    from kestrel.data.universe import load_universe
    from kestrel.frame import freeze_universe, universe_briefing
    from kestrel.market.portfolio import Holding, PortfolioState

    root = Path(os.environ.get("KESTREL_SHARED_DATA", str(Path(__file__).resolve().parent.parent.parent / "shared" / "data")))
    path = root / STOCKBENCH
    name, count = o200k()
    if not path.is_file():
        return {"universe_briefing_tokens": None, "universe_briefing_tokens_max": None, "universe_tokenizer": name,
                "universe_data": "absent"}
    u = load_universe(path).universe
    budget = {"budget": "4 view requests or repairs left, 20000 tokens left"}

    def held(cutoff: int, time_ns: int) -> PortfolioState:
        """Every symbol held (37 shares bought 3% under its last price): the largest portfolio pane."""
        flat = freeze_universe(u, cutoff, None, time_ns=time_ns)
        hs = []
        for m in flat.members:
            last = float(m.ticks.last[-1]) if len(m.ticks) else 100.0
            hs.append(Holding(m.data.symbol, 37, last * 0.97, last, 37 * last, 37 * last * 0.03))
        gross = sum(h.value for h in hs)
        return PortfolioState("USD", 100_000.0, 100_000.0 - gross * 0.97, 100_000.0 + gross * 0.03, gross, gross,
                              len(hs), tuple(hs))

    worst = 0
    sessions = u.sessions[-10:] if quick else u.sessions
    for s in sessions:
        for k, t in enumerate((s.open_ns, s.close_ns)):
            cutoff = t - 300 * NS_PER_S
            snap = freeze_universe(u, cutoff, held(cutoff, t), time_ns=t)
            text = universe_briefing(snap, Ordinal(k, "OPEN" if k == 0 else "CLOSE", t), extra_kernel=budget)
            assert "[budget" not in text, "the default universe view must fit its budget"
            worst = max(worst, count(text))
    last = u.sessions[-1]
    t = last.open_ns
    cutoff = t - 300 * NS_PER_S
    flat = PortfolioState("USD", 100_000.0, 100_000.0, 100_000.0, 0.0, 0.0, 0, tuple(Holding(x) for x in u.symbols))
    ordinal = Ordinal(0, "OPEN", t)
    snap = freeze_universe(u, cutoff, flat, time_ns=t)
    text = universe_briefing(snap, ordinal, extra_kernel=budget)
    return {
        "universe_briefing_tokens": count(text),
        "universe_briefing_tokens_max": worst,
        "universe_tokenizer": name,
        "universe_symbols": len(u),
        "universe_sessions_scanned": len(sessions),
        "universe_briefing_ms_median": round(median_ms(lambda: universe_briefing(snap, ordinal, extra_kernel=budget),
                                                       reps), 3),
        "freeze_universe_ms_median": round(median_ms(lambda: freeze_universe(u, cutoff, flat, time_ns=t), reps), 3),
    }

NEWS_SYMBOLS = 20
NEWS_ITEMS = 5_000
_WORDS = ("shares", "rally", "earnings", "beat", "miss", "guidance", "analyst", "upgrade", "downgrade", "merger",
          "probe", "launch", "dividend", "buyback", "CEO", "outlook", "record", "slump", "deal", "lawsuit")


def news_universe(data: MarketData, seed: int = 7) -> NewsFeed:
    """`NEWS_ITEMS` headlines for a `NEWS_SYMBOLS`-symbol universe (the data's symbol and 19
    others), spread over the data's week and the week before, titles of 4 to 30 words, a third
    with a summary, one in eleven a repeat."""
    rng = np.random.default_rng(seed)
    symbols = [data.symbol] + [f"S{k:02d}" for k in range(1, NEWS_SYMBOLS)]
    lo = int(data.ticks.ts[0]) - 7 * 86_400 * NS_PER_S
    hi = int(data.ticks.ts[-1])
    items = []
    for k in range(NEWS_ITEMS):
        words = rng.choice(_WORDS, size=int(rng.integers(4, 31)))
        title = " ".join(words) if k % 11 != 3 else "the same headline again"
        summary = " ".join(rng.choice(_WORDS, size=25)) if k % 3 == 0 else ""
        items.append(NewsItem(int(rng.integers(lo, hi)), (symbols[k % NEWS_SYMBOLS],), "Wire", title, summary))
    return NewsFeed.of(items)


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def format_floor(text: str) -> tuple[str, list[int | float]]:
    """A `str.format` template and the values that rebuild `text` exactly: every number
    becomes a field with the precision (or zero padding) it is printed with."""
    parts: list[str] = []
    values: list[int | float] = []
    pos = 0
    for m in _NUMBER.finditer(text):
        parts.append(text[pos : m.start()].replace("{", "{{").replace("}", "}}"))
        tok = m.group()
        if "." in tok:
            parts.append(f"{{:.{len(tok.split('.')[1])}f}}")
            values.append(float(tok))
        else:
            parts.append(f"{{:0{len(tok)}d}}" if tok.startswith("0") and len(tok) > 1 else "{:d}")
            values.append(int(tok))
        pos = m.end()
    parts.append(text[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(parts), values


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
    tokens = {}
    for p in view.panes:
        spec = DEFAULT_CATALOG.get(p.name)
        assert spec is not None
        tokens[p.name] = estimate_tokens(spec.builder(snap, dict(p.args)))
    text = briefing(snap, ordinal, view, {"budget": "tokens 8000 views 3"})
    template, values = format_floor(text)
    assert template.format(*values) == text, "the formatting floor must rebuild the briefing exactly"
    floor_ms = median_ms(lambda: template.format(*values), reps)

    feed = news_universe(data)
    nsnap = freeze(data, at, news=feed)
    news_spec = DEFAULT_CATALOG.get("news")
    quote_spec = DEFAULT_CATALOG.get("quote")
    assert news_spec is not None and quote_spec is not None
    news_args = {a.name: a.default for a in news_spec.args}
    news_text = pane_news(nsnap, news_args)
    news_ms = median_ms(lambda: pane_news(freeze(data, at, news=feed), news_args), reps)
    quote_ms = median_ms(lambda: quote_spec.builder(freeze(data, at, news=feed), {}), reps)

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
    universe = universe_figures(reps, args.quick)

    print(json.dumps({
        "briefing_ms_median": round(brief_ms, 4),
        "briefing_tokens": estimate_tokens(text),
        "format_floor_ms_median": round(floor_ms, 4),
        "format_floor_fields": len(values),
        "briefing_over_format_floor": round(brief_ms / floor_ms, 1),
        "tokens_per_pane": tokens,
        "news_pane_us_median": round(news_ms * 1000, 1),
        "news_pane_tokens": estimate_tokens(news_text),
        "news_pane_lines": news_text.count("\n"),
        "news_universe": {"symbols": NEWS_SYMBOLS, "items": NEWS_ITEMS},
        "news_over_quote_pane": round(news_ms / quote_ms, 2),
        "freeze_ms_median": round(freeze_ms, 4),
        "freeze_history_ticks": len(hist.ticks),
        "freeze_history_sessions": days,
        "freeze_copy_reference_ms": round(copy_ms, 4),
        "freeze_speedup_vs_copy": round(copy_ms / freeze_ms, 2),
        "freeze_shares_memory": shares,
        "generate_history_s": round(gen_s, 3),
        **universe,
        "quick": args.quick,
    }))


if __name__ == "__main__":
    main()
