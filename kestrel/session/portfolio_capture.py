"""The file of a portfolio run's capture: how its universe was loaded (`UniverseSource`), the
SHA-256 of the run's ledger, then the run's `PortfolioCapture` fields, in one JSON object.

Invariant: the header keys lead the object (the file begins with `CAPTURE_LEAD`, which a
single-symbol capture never does), and the file decodes as a `PortfolioCapture` too (msgspec
ignores the keys it does not know), so a replay loads the same universe, re-runs the recorded
turns and checks the ledger byte for byte against the recorded SHA-256.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

from kestrel.data.news import NewsSource
from kestrel.session.portfolio import PortfolioCapture

CAPTURE_LEAD = b'{"universe":'  # how a portfolio capture file begins (a single-symbol one never does)


class UniverseSource(msgspec.Struct, frozen=True):
    """How a universe was loaded: `data` (an absolute path, a folder or a glob), the column map,
    the factor file, the delimiter, the crossed/spike policies and the symbols table
    (`instruments`: each symbol's tick size, multiplier, currency and lot size). Replaying loads
    it again."""

    data: str
    columns: str | None = None
    factors: str | None = None
    delimiter: str = ","
    crossed: Literal["error", "drop", "keep"] = "error"
    spikes: Literal["error", "drop", "keep"] = "error"
    instruments: str | None = None


class CaptureHead(msgspec.Struct, frozen=True):
    """The header keys of a portfolio capture file (the rest is its `PortfolioCapture`): how
    the universe was loaded, the SHA-256 of the run's ledger and, for a run with news, the news
    file (its absolute path, SHA-256 and item count: a replay reads it again and refuses bytes
    that differ)."""

    universe: UniverseSource
    ledger_sha256: str | None = None
    news: NewsSource | msgspec.UnsetType = msgspec.UNSET


def capture_bytes(source: UniverseSource, capture: PortfolioCapture, ledger: bytes,
                  news: NewsSource | None = None) -> bytes:
    """A portfolio capture file: the `CaptureHead` keys, then the capture's own fields."""
    head = msgspec.json.encode(CaptureHead(source, hashlib.sha256(ledger).hexdigest(),
                                           msgspec.UNSET if news is None else news))
    return head[:-1] + b"," + capture.to_json()[1:] + b"\n"


__all__ = ["CAPTURE_LEAD", "CaptureHead", "UniverseSource", "capture_bytes"]
