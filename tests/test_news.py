"""News: the loader's formats and fail-closed rules, the feed's cut, the news pane's text, and the
look-ahead proof (an item one nanosecond after the cutoff never shows; editing or deleting future
items never changes a briefing; random cutoffs against a brute-force filter)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data import DataError
from kestrel.data.news import load_news, open_news, read_news
from kestrel.frame import DEFAULT_CATALOG, Ordinal, ResolvedPane, ResolvedView, briefing, freeze
from kestrel.frame.news import LINE_TOKENS, TITLE_TOKENS, line_tokens, pane_news
from kestrel.frame.text import estimate_tokens
from kestrel.market import MarketData, SessionSpec, Ticks
from kestrel.market.news import NewsFeed, NewsItem
from kestrel.market.ticks import F64, NS_PER_S

NEWS_FILE = "news/stockbench_dow20_news_20241231_20250730.jsonl"
DAYS = [dt.date(2025, 1, 2), dt.date(2025, 1, 3), dt.date(2025, 1, 6), dt.date(2025, 1, 7)]


def _ns(text: str) -> int:
    return int(np.datetime64(text.replace("Z", ""), "ns").astype(np.int64))


def _market(symbol: str = "AAPL", days: list[dt.date] = DAYS) -> MarketData:
    """US-equity sessions on `days` with one trade a minute (prices are not what news tests read)."""
    sessions = tuple(SessionSpec.us_equity(d) for d in days)
    ts = np.concatenate([np.arange(s.open_ns, s.close_ns, 60 * NS_PER_S, dtype=np.int64) for s in sessions])
    px: F64 = (240.0 + np.round(np.sin(np.arange(len(ts)) / 50.0), 2)).astype(np.float64)
    size = np.full(len(ts), 100.0)
    return MarketData(symbol, 0.01, Ticks(ts, px - 0.01, px + 0.01, px, size), sessions)


def _item(when: str, title: str, summary: str = "", symbols: tuple[str, ...] = ("AAPL",), source: str = "Wire") -> NewsItem:
    return NewsItem(_ns(when), symbols, source, title, summary)


def _render(snap_news: NewsFeed, at: str, data: MarketData | None = None, guard_s: int = 0, **args: int | str) -> str:
    full: dict[str, int | str] = {"n": 5, "symbol": "self", "since": 5}
    full.update(args)
    snap = freeze(data or _market(), _ns(at), guard_s * NS_PER_S, news=snap_news)
    return pane_news(snap, full)


# ------------------------------------------------------------------------------------------
# the loader


def test_jsonl_csv_and_parquet_load_the_same_items(tmp_path: Path) -> None:
    rows = [
        {"published_utc": "2025-01-03T15:00:00Z", "symbol": "aapl", "source": "Yahoo", "title": "Second",
         "summary": "more", "related": ["AAPL", "MSFT"]},
        {"published_utc": "2025-01-02T15:00:00Z", "symbol": "MSFT", "source": "", "title": "  First   one ",
         "summary": "", "related": []},
    ]
    jl = tmp_path / "n.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    csv = tmp_path / "n.csv"
    csv.write_text("published_utc,symbol,source,title,summary,related\n"
                   '2025-01-03T15:00:00Z,aapl,Yahoo,Second,more,"AAPL;MSFT"\n'
                   "2025-01-02T15:00:00Z,MSFT,,  First   one ,,\n", encoding="utf-8")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pqf = tmp_path / "n.parquet"
    table = pa.table({
        "published_utc": pa.array([_ns("2025-01-03T15:00:00"), _ns("2025-01-02T15:00:00")], type=pa.int64()).cast(
                                  pa.timestamp("ns", tz="UTC")),
        "symbol": ["aapl", "MSFT"], "source": ["Yahoo", ""], "title": ["Second", "  First   one "],
        "summary": ["more", None], "related": [["AAPL", "MSFT"], []],
    })
    pq.write_table(table, pqf)
    want = [
        NewsItem(_ns("2025-01-03T15:00:00"), ("AAPL", "MSFT"), "Yahoo", "Second", "more"),
        NewsItem(_ns("2025-01-02T15:00:00"), ("MSFT",), "", "First one", ""),
    ]
    for path in (jl, csv, pqf):
        assert read_news(path) == want, path
        loaded = load_news(path)
        assert [it.title for it in loaded.feed] == ["First one", "Second"]  # ordered by publication
        assert loaded.source.items == 2 and len(loaded.source.sha256) == 64
        assert loaded.source.path == str(path.resolve())


@pytest.mark.parametrize(("name", "content", "message"), [
    ("a.jsonl", b'{"symbol":"AAPL","title":"t"}\n', "line 1, column 'published_utc': no publication time"),
    ("a.jsonl", b'{"published_utc":"2025-01-02T10:00:00Z","symbol":"AAPL","title":"ok"}\n'
                b'{"published_utc":"","symbol":"AAPL","title":"t"}\n', "line 2, column 'published_utc': no publication"),
    ("a.jsonl", b'{"published_utc":"2025-13-02T10:00:00Z","symbol":"AAPL","title":"t"}\n', "line 1, column 'published_utc'"),
    ("a.jsonl", b'{"published_utc":"2299-01-02T10:00:00Z","symbol":"AAPL","title":"t"}\n', "year 2299 out of range"),
    ("a.jsonl", b'{"published_utc":"2025-01-02T10:00:00Z","symbol":"AAPL","title":"caf\xe9"}\n', "not UTF-8 text"),
    ("a.jsonl", b'{"published_utc":"2025-01-02T10:00:00Z","symbol":"AAPL","title":"  "}\n', "every item needs a title"),
    ("a.jsonl", b'{"published_utc":"2025-01-02T10:00:00Z","symbol":"","related":[],"title":"t"}\n', "no symbol"),
    ("a.jsonl", b'{"published_utc":"2025-01-02T10:00:00Z","symbol":"AA PL!","title":"t"}\n', "not a symbol"),
    ("a.jsonl", b'not json\n', "line 1: not a JSON object"),
    ("a.jsonl", b'\n\n', "file is empty"),
    ("a.csv", b"published_utc,symbol,title\n2025-01-02T10:00:00Z,AAPL,t,extra\n", "line 2: more fields than the header"),
    ("a.txt", b"x\n", "unknown news format '.txt'"),
    ("a.jsonl", gzip.compress(b'{"a":1}\n'), "gzip-compressed"),
])
def test_bad_news_files_fail_closed_naming_the_row(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError) as err:
        read_news(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_a_moved_copy_loads_and_a_tampered_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text('{"published_utc":"2025-01-02T10:00:00Z","symbol":"AAPL","title":"t"}\n', encoding="utf-8")
    source = load_news(path).source
    moved = tmp_path / "moved.jsonl"
    moved.write_bytes(path.read_bytes())
    path.unlink()
    with pytest.raises(DataError, match="the captured news file is not there; pass --news PATH"):
        open_news(source)
    assert [it.title for it in open_news(source, moved)] == ["t"]
    moved.write_text('{"published_utc":"2025-01-02T10:00:00Z","symbol":"AAPL","title":"T"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="its checksum changed since the capture"):
        open_news(source, moved)


# ------------------------------------------------------------------------------------------
# the feed and the pane


def test_the_feed_cut_is_strictly_before() -> None:
    t = _ns("2025-01-02T15:00:00")
    feed = NewsFeed.of([_item("2025-01-02T15:00:00", "at"), _item("2025-01-02T14:59:59.999999999", "before")])
    assert [it.title for it in feed.before(t)] == ["before"]
    assert [it.title for it in feed.before(t + 1)] == ["before", "at"]
    assert feed.before(t + 1).before(t).items == feed.before(t).items
    assert list(feed.before(t).latest(("AAPL",))) == [feed.items[0]]


def test_pane_text_pinned() -> None:
    feed = NewsFeed.of([
        _item("2025-01-02T21:30:00Z", "Apple ships a thing", "Apple ships a thing"),  # summary repeats: dropped
        _item("2025-01-03T13:05:00Z", "Apple faces a probe", "Regulators in the EU opened a case.", source="Reuters"),
        _item("2025-01-03T13:06:00Z", "apple  FACES a probe!", source="Yahoo"),  # the same headline: one line
        _item("2025-01-03T14:00:00Z", "Microsoft news", symbols=("MSFT",)),
        _item("2025-01-03T14:10:00Z", "Apple opens: up 1%", "Apple opens: up 1%. Shares rose at the open.", source=""),
    ])
    assert _render(feed, "2025-01-03T14:45:00Z") == (
        "NEWS AAPL 3 since the feed's start\n"
        "01-03 09:10 Apple opens: up 1% | Shares rose at the open.\n"
        "01-03 08:06 Yahoo: apple FACES a probe!\n"
        "01-02 16:30 Wire: Apple ships a thing"
    )
    # since=1: after the previous session's close (01-02 16:00 New York); all: every symbol
    assert _render(feed, "2025-01-03T14:45:00Z", since=1, n=2, symbol="all") == (
        "NEWS all 2 since 01-02 16:00\n"
        "01-03 09:10 Apple opens: up 1% | Shares rose at the open.\n"
        "01-03 09:00 Wire: Microsoft news"
    )
    assert _render(feed, "2025-01-03T14:45:00Z", symbol="msft") == "NEWS MSFT 1 since the feed's start\n01-03 09:00 Wire: Microsoft news"
    assert _render(feed, "2025-01-03T14:45:00Z", symbol="XYZ").startswith("NEWS XYZ: no such symbol here")
    assert _render(feed, "2025-01-02T20:00:00Z", since=0) == "NEWS AAPL none since 01-02 09:30"


def test_long_titles_are_cut_to_the_token_budget() -> None:
    title = " ".join(f"word{k}" for k in range(200))
    summary = "A summary that says something else entirely, " * 20
    line = _render(NewsFeed.of([_item("2025-01-02T15:00:00Z", title, summary)]), "2025-01-02T16:00:00Z").split("\n")[1]
    assert line.startswith("01-02 10:00 Wire: word0 word1 ") and "… | A summary" in line and line.endswith("…")
    shown_title = line.split(": ", 1)[1].split(" | ")[0]
    assert estimate_tokens(shown_title) <= TITLE_TOKENS
    assert estimate_tokens(line) <= LINE_TOKENS


def test_news_is_dated_in_the_session_zone() -> None:
    # 14:30 UTC is 09:30 in New York in January (EST) and 10:30 in July (EDT)
    jan = _render(NewsFeed.of([_item("2025-01-02T14:30:00Z", "x")]), "2025-01-02T15:00:00Z")
    jul = _render(NewsFeed.of([_item("2025-07-01T14:30:00Z", "x")]), "2025-07-01T15:00:00Z",
                  data=_market(days=[dt.date(2025, 7, 1)]))
    assert jan.split("\n")[1] == "01-02 09:30 Wire: x" and jul.split("\n")[1] == "07-01 10:30 Wire: x"


def test_news_pane_is_in_the_catalog_with_its_bounds() -> None:
    spec = DEFAULT_CATALOG.get("news")
    assert spec is not None and spec.signature() == "news(n=5, symbol=self, since=5)"
    n, symbol, since = spec.args
    assert (n.min, n.max, since.min, since.max, symbol.type) == (1, 20, 0, 60, "ident")


# ------------------------------------------------------------------------------------------
# look-ahead


def test_one_nanosecond_after_the_cutoff_never_shows() -> None:
    cutoff = _ns("2025-01-03T15:00:00")
    t = cutoff + 300 * NS_PER_S
    for delta, shown in ((-1, True), (0, False), (1, False)):
        item = NewsItem(cutoff + delta, ("AAPL",), "Wire", "the item", "")
        text = briefing(freeze(_market(), t, 300 * NS_PER_S, news=NewsFeed.of([item])), Ordinal(1, "10:05", t),
                        ResolvedView("v", (ResolvedPane("news", (("n", 20), ("symbol", "all"), ("since", 60))),), 900))
        assert ("the item" in text) is shown, delta


def _real_feed(shared_data: Path) -> NewsFeed:
    return load_news(shared_data / NEWS_FILE).feed


def test_shared_news_shown_only_after_publication(shared_data: Path) -> None:
    """Real headlines for the StockBench universe at cutoffs around their publication times."""
    feed = _real_feed(shared_data)
    aapl = [it for it in feed.for_symbol("AAPL") if dt.date(2025, 1, 2) <= _date(it.ts) <= dt.date(2025, 1, 7)]
    assert len(aapl) >= 5
    data = _market("AAPL")
    for it in aapl[:12]:
        key = re.escape(it.title[:20])
        for cutoff, shown in ((it.ts, False), (it.ts + 1, True)):
            snap = freeze(data, cutoff, 0, news=feed)
            text = pane_news(snap, {"n": 20, "symbol": "self", "since": 60})
            later = [x for x in feed.for_symbol("AAPL") if it.ts < x.ts < cutoff]
            if shown and len(later) < 19:  # within the 20 newest
                assert re.search(key, snap.mask_text(text).replace("  ", " ")) or it.title[:20].split()[0] in text
            if not shown:
                assert all(x.ts < cutoff for x in snap.news)


def _date(ts: int) -> dt.date:
    return dt.datetime.fromtimestamp(ts / 1e9, dt.timezone.utc).date()


def _brute(items: list[NewsItem], cutoff: int) -> NewsFeed:
    """The feed a brute-force filter keeps: every item published strictly before `cutoff`."""
    return NewsFeed.of([it for it in items if it.ts < cutoff])


@st.composite
def _feeds(draw: st.DrawFn) -> list[NewsItem]:
    lo, hi = _ns("2025-01-01T06:00:00"), _ns("2025-01-08T00:00:00")  # 2025 on New York's clock
    stamps = draw(st.lists(st.integers(lo, hi), min_size=1, max_size=60))
    titles = draw(st.lists(st.sampled_from(["up", "down", "Up!", "a merger", "earnings beat", "x" * 300]),
                           min_size=len(stamps), max_size=len(stamps)))
    syms = draw(st.lists(st.sampled_from([("AAPL",), ("MSFT",), ("AAPL", "MSFT")]),
                         min_size=len(stamps), max_size=len(stamps)))
    return [NewsItem(t, s, "Wire", f"{title} {k % 7}", "") for k, (t, title, s) in enumerate(zip(stamps, titles, syms))]


_DATA = _market()


@settings(max_examples=80, deadline=None)
@given(_feeds(), st.integers(_ns("2025-01-01T06:00:00"), _ns("2025-01-08T00:00:00")), st.integers(1, 20),
       st.sampled_from(["self", "all", "MSFT"]), st.integers(0, 60), st.sampled_from([0, 1, 300]))
def test_random_cutoffs_every_item_before_the_cutoff(items: list[NewsItem], cutoff: int, n: int, symbol: str,
                                                     since: int, guard_s: int) -> None:
    """At any cutoff, the pane over the whole feed equals the pane over a brute-force filter of it
    and over a feed whose future items were edited or deleted; every line's minute is at or
    before the cutoff's."""
    t = cutoff + guard_s * NS_PER_S
    args: dict[str, int | str] = {"n": n, "symbol": symbol, "since": since}
    whole = pane_news(freeze(_DATA, t, guard_s * NS_PER_S, news=NewsFeed.of(items)), args)
    brute = pane_news(freeze(_DATA, t, guard_s * NS_PER_S, news=_brute(items, cutoff)), args)
    edited = [it if it.ts < cutoff else NewsItem(cutoff, ("AAPL", "MSFT"), "Edited", "FUTURE " + it.title)
              for k, it in enumerate(items) if it.ts < cutoff or k % 2]
    assert whole == brute == pane_news(freeze(_DATA, t, guard_s * NS_PER_S, news=NewsFeed.of(edited)), args)
    snap = freeze(_DATA, t, guard_s * NS_PER_S)
    cut_minute = snap.dated(cutoff)[:-3]
    for line in whole.split("\n")[1:]:
        stamp = line[:11]
        # the same year throughout: mm-dd hh:mm orders as text
        assert stamp <= cut_minute, (line, cut_minute)
        assert "FUTURE" not in line


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("abcXYZ019 .,$%’é-_\t"), max_size=120))
def test_line_tokens_is_the_estimator(text: str) -> None:
    """The pane's per-line estimate and the frame's estimator agree on any line."""
    assert line_tokens(text) == estimate_tokens(text)
