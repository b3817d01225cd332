"""The news pane: the newest headlines published strictly before the snapshot's cutoff.

Format (docs/panes.md "news"):

```
NEWS AAPL 3 since 12-24 16:00
12-31 11:23 Yahoo: McDonald's opens first restaurant in Gangtok, Sikkim | The new restaurant…
12-30 16:30 SeekingAlpha: Monthly Options Series: Earn A Potential 10-15% Income
```

Invariants:
- it reads only `snapshot.news`, which `freeze` cut at the cutoff: no item published at or after
  the cutoff can show, whatever the arguments;
- items are newest first; the same headline twice (case, spacing and punctuation aside) is one
  line, the newest; at most `n` lines;
- `since=k` keeps the items published after the close of the k-th session before the current
  one (`since=0`: since the current session's open; all items when there are fewer sessions);
- each line is dated `mm-dd hh:mm` on the wall clock of the session the item falls in (the
  session's zone), names its source when it has one, holds the title cut to `TITLE_TOKENS`
  estimated tokens and, only when the summary says more than the title, the summary after ` | `
  cut to `SUMMARY_TOKENS` (a cut ends in `…`); a line never exceeds `LINE_TOKENS`;
- `symbol=self` (the default) is the session's symbol, `symbol=all` every item of the feed, any
  other word one symbol (upper-cased) the feed names (in blind mode: an alias of the run).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.market.news import NewsItem

if TYPE_CHECKING:
    from kestrel.frame.universe import UniverseSnapshot

Args = Mapping[str, int | str]

TITLE_TOKENS = 24
SUMMARY_TOKENS = 20
LINE_TOKENS = 64
"""The estimated tokens of one line at most: date, time, source, title and summary."""
SOURCE_CHARS = 16

_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_RUNS = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]|\n")


def line_tokens(text: str) -> int:
    """`estimate_tokens(text)` for one short line, without numpy's per-call overhead (the same
    rule: letters ceil(n/6), digits ceil(n/3), any other non-space character 1)."""
    n = 0
    for run in _RUNS.findall(text):
        c = run[0]
        if "A" <= c <= "Z" or "a" <= c <= "z":
            n += (len(run) + 5) // 6
        elif "0" <= c <= "9":
            n += (len(run) + 2) // 3
        else:
            n += 1
    return n


def headline_key(text: str) -> str:
    """What makes two headlines the same: their words, case-folded (spacing and punctuation
    aside)."""
    return " ".join(_WORDS.findall(text.casefold()))


def cut_tokens(text: str, budget: int) -> str:
    """`text` cut at a word boundary so that its estimate stays within `budget` tokens (a cut
    text ends in `…`, counted)."""
    if line_tokens(text) <= budget:
        return text
    out: list[str] = []
    used = 1  # the ellipsis
    for word in text.split(" "):
        c = line_tokens(word)
        if used + c > budget:
            break
        out.append(word)
        used += c
    if not out:  # one word longer than the budget: cut by characters
        word = text.split(" ")[0]
        while word and line_tokens(word) + 1 > budget:
            word = word[:-1]
        out = [word] if word else []
    return " ".join(out).rstrip(" ,;:-") + "…"


def adds(summary: str, title: str) -> str:
    """The part of `summary` that adds to `title`: empty when it repeats the title (or is part
    of it), the remainder when it starts with the title, else the whole summary."""
    s, t = headline_key(summary), headline_key(title)
    if not s or s in t:
        return ""
    if t and s.startswith(t):
        # drop the title's words from the front of the summary text
        words = summary.split(" ")
        k, seen = 0, ""
        while k < len(words) and headline_key(seen) != t:
            seen = (seen + " " + words[k]).strip()
            k += 1
        return " ".join(words[k:]).lstrip(" .,;:-")
    return summary


def news_line(snap: FrozenSnapshot, item: NewsItem, mask: Callable[[str], str]) -> str:
    """One item's line (see the module docstring)."""
    when = snap.dated(item.ts)[:-3]  # mm-dd hh:mm
    source = mask(item.source)[:SOURCE_CHARS].strip()
    head = f"{when} {source}: " if source else f"{when} "
    title = " ".join(mask(item.title).split())
    room = LINE_TOKENS - line_tokens(head) - 2
    text = cut_tokens(title, min(TITLE_TOKENS, room))
    extra = adds(" ".join(mask(item.summary).split()), title)
    left = room - line_tokens(text) - 1
    if extra and left >= 4:
        text += " | " + cut_tokens(extra, min(SUMMARY_TOKENS, left))
    return head + text


def _symbols(snap: FrozenSnapshot, which: str) -> tuple[str, ...] | None | str:
    """The real symbols `which` names (None: all); a string is the pane's refusal."""
    word = which.strip()
    if word == "all":
        return None
    if word in ("self", "", snap.data.symbol, snap.symbol):
        return (snap.data.symbol,)
    real = snap.real_symbol(word.upper())
    if real is None and snap.blind is None and word.upper() in snap.news.symbols:
        real = word.upper()  # another symbol of the feed (blind mode names only the run's aliases)
    if real is None:
        return f"NEWS {word}: no such symbol here; use symbol=self, symbol=all or a symbol of the session"
    return (real,)


def _since_ns(snap: FrozenSnapshot, k: int) -> int | None:
    """The start of the `since=k` window, None for all of the feed."""
    i = snap.session_index
    if i < 0 or i - k < 0:
        return None
    if k == 0:
        return int(snap.data.session_open_ns[i])
    return int(snap.data.session_close_ns[i - k])


def pane_news(snap: FrozenSnapshot, args: Args) -> str:
    which = args["symbol"]
    assert isinstance(which, str)
    chosen = _symbols(snap, which)
    if isinstance(chosen, str):
        return chosen
    label = "all" if chosen is None else snap.symbol if chosen == (snap.data.symbol,) else chosen[0]
    return news_text(snap, args, chosen, label)


def universe_news(usnap: UniverseSnapshot, args: Args) -> str:
    """The news pane over a universe: `symbol=self` or `all` the items of every member, a symbol
    (its alias in blind mode) one member's."""
    which = args["symbol"]
    assert isinstance(which, str)
    if which.strip() in ("self", "all", ""):
        return news_text(usnap.clock, args, usnap.symbols, "all")
    member = usnap.member(which)
    if member is None:
        return f"NEWS {which}: no such symbol here; use symbol=all or a symbol of the universe"
    return news_text(member, args, (member.data.symbol,), member.symbol)


def news_text(snap: FrozenSnapshot, args: Args, chosen: tuple[str, ...] | None, label: str) -> str:
    """The pane's text over the items of `chosen` (None: the whole feed), headed `label`."""
    n, since = args["n"], args["since"]
    assert isinstance(n, int) and isinstance(since, int)
    start = _since_ns(snap, since)
    head = f"NEWS {label}"
    window = f"since {snap.dated(start)[:-3]}" if start is not None else "since the feed's start"
    mask = snap.mask_text
    seen: set[str] = set()
    lines: list[str] = []
    for item in snap.news.latest(chosen):
        if start is not None and item.ts < start:
            break
        key = headline_key(item.title)
        if key in seen:
            continue
        seen.add(key)
        lines.append(news_line(snap, item, mask))
        if len(lines) >= n:
            break
    if not lines:
        return f"{head} none {window}"
    return "\n".join([f"{head} {len(lines)} {window}"] + lines)


__all__ = ["LINE_TOKENS", "SUMMARY_TOKENS", "TITLE_TOKENS", "adds", "cut_tokens", "headline_key", "line_tokens",
           "news_line", "news_text", "pane_news", "universe_news"]
