"""Loading news files (JSON lines, CSV, Parquet) into a `NewsFeed`, and `NewsSource`, what a
run's news was (recorded in the capture's data source, verified by replay).

Columns (the first name of each list the file holds is used):
- publication instant: `published_utc`, `published`, `ts`, `timestamp`, `datetime`, `time`
  (ISO-8601; without an offset it is read as UTC) — required on every row;
- symbols: `symbol` or `ticker` (one) and/or `related`, `symbols` or `tickers` (a list: a JSON
  array, or in CSV a field of symbols separated by `;`, `,`, `|` or spaces) — at least one per
  row;
- `source` (optional), `title` or `headline` (required, non-empty), `summary`, `description` or
  `body` (optional).

Fail closed, like the market-data loaders: each bad row is a `DataError` naming the file, the
line (JSON lines and CSV, 1-based) or row (Parquet) and the field: no or unparsable timestamp,
a year outside 1678..2261 (the loaders' range), not UTF-8, binary data, a missing title or
symbol, a field longer than its bound, more than `MAX_ITEMS` items or a file over `MAX_BYTES`.
Symbols are upper-cased; whitespace in text is collapsed to single spaces.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from kestrel.data.csvfields import check_text
from kestrel.data.errors import DataError
from kestrel.data.readers import check_size, read_bytes, show
from kestrel.data.timestamps import BadValue, parse_timestamps
from kestrel.market.news import NewsFeed, NewsItem

MAX_BYTES = 512 << 20
"""The largest news file read (512 MiB)."""
MAX_ITEMS = 2_000_000
MAX_TITLE_CHARS = 2_000
MAX_SUMMARY_CHARS = 20_000
MAX_SYMBOLS = 100
MAX_SYMBOL_CHARS = 24

TS_NAMES = ("published_utc", "published", "ts", "timestamp", "datetime", "time")
SYMBOL_NAMES = ("symbol", "ticker")
RELATED_NAMES = ("related", "symbols", "tickers")
TITLE_NAMES = ("title", "headline")
SUMMARY_NAMES = ("summary", "description", "body")
_SPLIT = re.compile(r"[;,|\s]+")
_SYMBOL = re.compile(r"^[A-Z0-9][A-Z0-9._/:=^-]*$")


class NewsSource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A news file: its absolute `path`, the SHA-256 of its bytes and the items it held."""

    path: str
    sha256: str
    items: int

    def describe(self) -> str:
        return f"{self.path} (sha256 {self.sha256[:12]}…, {self.items} items)"


@dataclass(frozen=True, slots=True)
class LoadedNews:
    feed: NewsFeed
    source: NewsSource


def _clean(text: str) -> str:
    return " ".join(text.split())


def _pick(row: dict[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    for n in names:
        if n in row:
            return n, row[n]
    return None, None


def _symbols(path: Path, where: dict[str, int], one: Any, many: Any) -> tuple[str, ...]:
    raw: list[Any] = []
    if one is not None and one != "":
        raw.append(one)
    if isinstance(many, str):
        raw += [s for s in _SPLIT.split(many) if s]
    elif isinstance(many, list | tuple):
        raw += list(many)
    elif many is not None and not (isinstance(many, float) and many != many):
        raise DataError(path, f"related symbols must be a list or text, got {show(repr(many))}",
                        column="related", **where)
    out: list[str] = []
    for s in raw:
        if not isinstance(s, str):
            raise DataError(path, f"a symbol must be text, got {show(repr(s))}", column="symbol", **where)
        sym = s.strip().upper()
        if not sym:
            continue
        if len(sym) > MAX_SYMBOL_CHARS or not _SYMBOL.match(sym):
            raise DataError(path, f"not a symbol: {show(s)}", column="symbol", **where)
        if sym not in out:
            out.append(sym)
    if not out:
        raise DataError(path, "no symbol: give the item a symbol or a list of related symbols",
                        column="symbol", **where)
    if len(out) > MAX_SYMBOLS:
        raise DataError(path, f"{len(out)} symbols on one item (at most {MAX_SYMBOLS})", column="related", **where)
    return tuple(out)


def _text(path: Path, where: dict[str, int], name: str, value: Any, bound: int, required: bool) -> str:
    if value is None or (isinstance(value, float) and value != value):
        value = ""
    if not isinstance(value, str):
        raise DataError(path, f"must be text, got {show(repr(value))}", column=name, **where)
    if len(value) > bound:
        raise DataError(path, f"{len(value)} characters (at most {bound})", column=name, **where)
    text = _clean(value)
    if required and not text:
        raise DataError(path, "empty: every item needs a title", column=name, **where)
    return text


def _items(path: Path, rows: list[dict[str, Any]], wheres: list[dict[str, int]]) -> list[NewsItem]:
    if not rows:
        raise DataError(path, "no news items")
    if len(rows) > MAX_ITEMS:
        raise DataError(path, f"{len(rows)} items (at most {MAX_ITEMS}): split the file")
    stamps: list[str] = []
    for row, where in zip(rows, wheres):
        name, ts = _pick(row, TS_NAMES)
        if ts is None or (isinstance(ts, str) and not ts.strip()):
            raise DataError(path, f"no publication time: give a {TS_NAMES[0]} (ISO-8601, UTC)",
                            column=name or TS_NAMES[0], **where)
        if not isinstance(ts, str):
            raise DataError(path, f"the publication time must be ISO-8601 text, got {show(repr(ts))}",
                            column=name, **where)
        if len(ts) > 64:
            raise DataError(path, f"not a timestamp: {show(ts)}", column=name, **where)
        stamps.append(ts.strip())
    try:
        ts_ns = parse_timestamps(np.array(stamps, dtype=str), "iso", "UTC")
    except BadValue as e:
        name = _pick(rows[e.index], TS_NAMES)[0]
        raise DataError(path, f"{e.reason}: {show(e.text)}", column=name, **wheres[e.index]) from None
    out: list[NewsItem] = []
    for k, (row, where) in enumerate(zip(rows, wheres)):
        _, one = _pick(row, SYMBOL_NAMES)
        _, many = _pick(row, RELATED_NAMES)
        tname, title = _pick(row, TITLE_NAMES)
        sname, summary = _pick(row, SUMMARY_NAMES)
        source = row.get("source")
        out.append(NewsItem(
            ts=int(ts_ns[k]),
            symbols=_symbols(path, where, one, many),
            source=_text(path, where, "source", source, 200, False),
            title=_text(path, where, tname or TITLE_NAMES[0], title, MAX_TITLE_CHARS, True),
            summary=_text(path, where, sname or SUMMARY_NAMES[0], summary, MAX_SUMMARY_CHARS, False),
        ))
    return out


def _decode(path: Path, raw: bytes) -> str:
    check_text(path, raw[:4096])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(path, f"not UTF-8 text ({e.reason} at byte {e.start})", line=line) from None


_object = msgspec.json.Decoder(dict[str, Any])


def _jsonl(path: Path, raw: bytes) -> list[NewsItem]:
    text = _decode(path, raw)
    rows: list[dict[str, Any]] = []
    wheres: list[dict[str, int]] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            rows.append(_object.decode(line))
        except msgspec.DecodeError as e:
            raise DataError(path, f"not a JSON object: {e}", line=n) from None
        wheres.append({"line": n})
    return _items(path, rows, wheres)


def _csv(path: Path, raw: bytes) -> list[NewsItem]:
    import csv
    import io

    text = _decode(path, raw)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    rows: list[dict[str, Any]] = []
    wheres: list[dict[str, int]] = []
    try:
        for row in reader:
            if None in row:
                raise DataError(path, "more fields than the header names", line=reader.line_num)
            rows.append({k.strip(): v for k, v in row.items() if k is not None})
            wheres.append({"line": reader.line_num})
    except csv.Error as e:
        raise DataError(path, f"bad CSV: {e}", line=reader.line_num) from None
    if reader.fieldnames is None:
        raise DataError(path, "file is empty: expected a header line and news rows")
    return _items(path, rows, wheres)


def _parquet(path: Path) -> list[NewsItem]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(path, "reading Parquet needs pyarrow, an optional extra: pip install 'kestrel[parquet]'") from None
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several types for a bad file
        raise DataError(path, f"not a readable Parquet file: {' '.join(str(e).split())[:200]}") from None
    names = table.column_names
    ts_name = next((n for n in TS_NAMES if n in names), None)
    if ts_name is not None and pa.types.is_timestamp(table.schema.field(ts_name).type):
        col = table.column(ts_name)
        if col.null_count:
            i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
            raise DataError(path, "no publication time (null)", row=i + 1, column=ts_name)
        as_utc = col.cast(pa.timestamp("ns", tz="UTC")) if col.type.tz else col.cast(pa.timestamp("ns"))
        iso = np.datetime_as_string(np.asarray(as_utc.cast(pa.int64()).to_numpy(), dtype="datetime64[ns]"))
        table = table.set_column(names.index(ts_name), ts_name, pa.array([s + "Z" for s in iso.tolist()]))
    try:
        rows = table.to_pylist()
    except Exception as e:  # invalid UTF-8 in a string column, ...
        raise DataError(path, f"cannot read the file's columns: {' '.join(str(e).split())[:200]}") from None
    return _items(path, rows, [{"row": i + 1} for i in range(len(rows))])


def read_news(path: str | Path) -> list[NewsItem]:
    """The items of a news file in file order (see the module docstring for the checks)."""
    p = Path(path)
    if p.is_dir():
        raise DataError(p, "is a directory: give a news file (.jsonl, .csv or .parquet)")
    if not p.is_file():
        raise DataError(p, "no such news file")
    size = check_size(p)
    if size > MAX_BYTES:
        raise DataError(p, f"{size} bytes: news files are read up to {MAX_BYTES >> 20} MiB; split it")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return _parquet(p)
    raw = read_bytes(p)  # the readers' bounds when a server loads it (regular files, its size cap)
    if not raw.strip():
        raise DataError(p, "file is empty: expected news items")
    if suffix == ".csv":
        return _csv(p, raw)
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _jsonl(p, raw)
    raise DataError(p, f"unknown news format {p.suffix!r}: use .jsonl (JSON lines), .csv or .parquet")


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def load_news(path: str | Path) -> LoadedNews:
    """The feed of a news file and its `NewsSource` (path, SHA-256 of the bytes read, items);
    a file that cannot be read or parsed is a `DataError`."""
    p = Path(path)
    try:
        items = read_news(p)
        return LoadedNews(NewsFeed.of(items), NewsSource(path=str(p.resolve()), sha256=file_sha256(p),
                                                         items=len(items)))
    except OSError as exc:
        raise DataError(p, f"cannot read it: {exc.strerror or exc}") from None


def open_news(source: NewsSource, path: str | Path | None = None) -> NewsFeed:
    """Load a recorded news source again, from `path` (a moved copy) or its recorded path;
    a missing file or bytes whose checksum differs from the recorded one is a `DataError`."""
    where = Path(path) if path is not None else Path(source.path)
    if not where.is_file():
        hint = "" if path is not None else "; pass --news PATH to point at a copy of it"
        raise DataError(where, f"the captured news file is not there{hint}")
    digest = file_sha256(where)
    if digest != source.sha256:
        raise DataError(where, f"its checksum changed since the capture (sha256 {digest[:16]}…, recorded "
                               f"{source.sha256[:16]}…): this is not the news the capture was made on")
    return load_news(where).feed


__all__ = [
    "MAX_BYTES",
    "LoadedNews",
    "NewsSource",
    "load_news",
    "open_news",
    "read_news",
]
