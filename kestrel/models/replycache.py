"""The reply cache (opt-in): a model reply recorded once and played back for the same request.

A reply is keyed by the SHA-256 of the canonical JSON (sorted keys, msgspec) of the provider,
the model, the base URL (trailing `/` dropped; None: the SDK's default endpoint) and the full
request the adapter sends: every parameter (output limit, effort, ...) and the whole message
list, the system prompt included. So any change to what would be sent is another key; nothing
that is not sent (the timeout, the API key) is part of it. A hit returns the recorded text,
usage and truncation with no call, marked `cached`; only a successful reply is recorded.

The store is one SQLite file (`replies.sqlite3` in the cache's directory) in WAL mode with a
busy timeout, written with `INSERT OR IGNORE`: writers in several threads and processes never
corrupt it or block readers, and when two of them record the same key the first one stays
(both replies answered the same request). The model agent uses a cache only when one is given.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from kestrel.session.protocol import Usage

CACHE_FILE = "replies.sqlite3"
KEY_VERSION = "kestrel-reply-cache/1"


class CachedReply(msgspec.Struct, frozen=True):
    """What a hit plays back."""

    text: str
    usage: Usage
    truncated: bool = False
    estimated: bool = False
    refusal: str | None = None
    reasoning: str | None = None


def reply_key(provider: str, model: str, base_url: str | None, request: Mapping[str, Any]) -> str:
    """The cache key of a request (see the module docstring)."""
    canonical = msgspec.json.encode(
        {"v": KEY_VERSION, "provider": provider, "model": model,
         "base_url": None if base_url is None else base_url.rstrip("/"), "request": request},
        order="sorted",
    )
    return hashlib.sha256(canonical).hexdigest()


class ReplyCache:
    """The cache in `directory` (created if missing). Thread-safe; open one per process."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.directory / CACHE_FILE, timeout=60.0, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, provider TEXT NOT NULL,"
                             " model TEXT NOT NULL, reply BLOB NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise ValueError(f"cannot open the reply cache in {self.directory}: {exc}") from None
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        self._decoder = msgspec.json.Decoder(CachedReply)
        self.hits = 0
        self.misses = 0
        self.stored = 0

    def get(self, key: str) -> CachedReply | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return self._decoder.decode(row[0])

    def put(self, key: str, provider: str, model: str, reply: CachedReply) -> None:
        blob = self._encoder.encode(reply)
        with self._lock:
            cur = self._db.execute("INSERT OR IGNORE INTO replies VALUES (?, ?, ?, ?)", (key, provider, model, blob))
            self.stored += cur.rowcount > 0

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


__all__ = ["CACHE_FILE", "CachedReply", "ReplyCache", "reply_key"]
