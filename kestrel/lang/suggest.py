""""Did you mean": the one spelling-suggestion helper (a leaf module) for the parser, the
checker and the pane resolver, with one similarity cutoff."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# difflib's ratio (2 * matched characters / total length) a candidate needs: 0.7 suggests
# `last` for `lst`, `sma` for `smaa` and WHEN for `WHN`, not `vwap` for `ap` nor `time` for `te`.
# (Was 0.7 for keywords, 0.6 for series and functions, 0.5 for panes; 0.7 changed the fewest
# messages: 53 of 6,015 broken documents, all series/function hints.)
CUTOFF = 0.7


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option most similar to `word` (ties: the greatest), or None below `CUTOFF`."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=CUTOFF)
    return close[0] if close else None


__all__ = ["CUTOFF", "closest"]
