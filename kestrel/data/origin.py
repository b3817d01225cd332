"""Where loaded market data came from, remembered by the loaders so a run on it can name its
source without being told (`kestrel.data.source.source_of`).

`remember(data, origin)` is called by `load` (a file: its resolved path, the load's report and
delimiter, the file's size and modification time at the load) and `load_sample` (the sample's
seed); `origin_of(data)` finds it again for the same `MarketData` (by its tick array's
identity, held by a weak reference: nothing is kept alive). A file's checksum is computed
when the source is asked for, and only while the file still has the size and modification
time it had at the load; a file changed since is not vouched for (None).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from kestrel.market.data import MarketData


@dataclass(frozen=True)
class FileOrigin:
    path: str
    report: Any  # kestrel.data.load.LoadReport
    delimiter: str
    size: int
    mtime_ns: int
    columns: str | None = None  # the role=column mapping the file was read with, as text


@dataclass(frozen=True)
class SampleOrigin:
    seed: int


Origin = FileOrigin | SampleOrigin

_LOCK = threading.Lock()
_ORIGINS: dict[int, tuple[weakref.ref[Any], Origin]] = {}


def _forget(key: int) -> None:
    with _LOCK:
        _ORIGINS.pop(key, None)


def remember(data: MarketData, origin: Origin) -> None:
    """Record where `data` came from (for as long as its ticks live)."""
    arr = data.ticks.ts
    key = id(arr)

    def gone(_: weakref.ref[Any]) -> None:
        _forget(key)

    with _LOCK:
        _ORIGINS[key] = (weakref.ref(arr, gone), origin)


def origin_of(data: MarketData) -> Origin | None:
    """Where `data` came from, if a loader recorded it."""
    arr = data.ticks.ts
    with _LOCK:
        entry = _ORIGINS.get(id(arr))
    return entry[1] if entry is not None and entry[0]() is arr else None


__all__ = ["FileOrigin", "Origin", "SampleOrigin", "origin_of", "remember"]
