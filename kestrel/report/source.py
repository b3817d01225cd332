"""The data a run used, named and checksummed: the SHA-256 of the data file's bytes (of the
generated ticks for the bundled sample), the identity a sweep key and a report carry.

A data name is the capture header's `data` field: `sample`, `sample|seed=N`, or a path
optionally followed by `|option=value` loader options.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from typing import Any

import numpy as np

from kestrel.market.data import MarketData

CHUNK = 1 << 20


def data_path(name: str) -> str | None:
    """The file a data name reads, or None for the bundled sample (`sample`, `sample|seed=N`,
    `sample (seed N)`)."""
    head = name.split("|", 1)[0]
    return None if head == "sample" or head.startswith("sample (") else head


@lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str) -> str:
    """SHA-256 of a file's bytes (cached per path, size and modification time)."""
    st = os.stat(path)
    return _file_sha256(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def ticks_sha256(data: MarketData) -> str:
    """SHA-256 of the ticks' columns (ts, bid, ask, last, size as little-endian bytes)."""
    h = hashlib.sha256()
    t = data.ticks
    for col in (t.ts.astype("<i8"), t.bid.astype("<f8"), t.ask.astype("<f8"), t.last.astype("<f8"),
                t.size.astype("<f8")):
        h.update(np.ascontiguousarray(col).tobytes())
    return h.hexdigest()


def data_sha256(name: str, data: MarketData | None = None) -> str:
    """The checksum of the data named `name`: its file's SHA-256, or for the sample the
    SHA-256 of its ticks (`data` is then required)."""
    path = data_path(name)
    if path is not None:
        return file_sha256(path)
    if data is None:
        raise ValueError("the sample's checksum is taken over its ticks: pass the loaded data")
    return ticks_sha256(data)


def header_sha256(header: Any, data: MarketData) -> str | None:
    """The checksum of a run's data from its capture header: the SHA-256 the header's data
    source records when it has one, else computed from the data name; None when the file is
    gone."""
    source = getattr(header, "source", None)
    recorded = getattr(source, "sha256", None)
    if isinstance(recorded, str) and recorded:
        return recorded
    if getattr(source, "kind", None) == "sample":
        return ticks_sha256(data)
    try:
        return data_sha256(str(header.data), data)
    except OSError:
        return None


__all__ = ["data_path", "data_sha256", "file_sha256", "header_sha256", "ticks_sha256"]
