"""Loading market-data files (CSV, Parquet) into `MarketData`.

Parsing is vectorized (numpy for CSV, pyarrow for Parquet); Python loops run only on the
error path, to name the first bad row. Checks, each a `DataError` naming file, line/row and
column: empty file, missing column, wrong field count, unparsable or non-finite number,
unparsable timestamp, timestamps going backwards, inconsistent bar (high/low), crossed quote.

Crossed quotes (ask < bid) follow `crossed`: "error" (default: names the first bad row and
the count), "drop" (rows removed, count reported) or "keep" (rows kept as recorded, count
reported, `MarketData.crossed_kept` set: the documented exception to the Ticks bid <= ask
invariant, see `kestrel.frame.ticks`).

Bars become ticks: each bar yields 4 synthetic trade ticks at offsets 0, 1/4, 1/2 and 3/4 of
the bar: open, then low then high when close >= open (else high then low), then close; each
carries a quarter of the bar's volume; bid = ask = last.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from kestrel.data.csvfields import CHUNK_ROWS, check_text, chunk_fields, column_text
from kestrel.data.errors import DataError
from kestrel.data.spec import DEFAULT_SPIKE_FACTOR, PRESETS, CrossedPolicy, LoadSpec, SessionKind, SpikePolicy, preset
from kestrel.data.timestamps import BadValue, localize, parse_timestamps
from kestrel.frame.market import Instrument, MarketData
from kestrel.frame.session import NS_PER_DAY, SessionSpec
from kestrel.frame.ticks import F64, I64, NS_PER_S, Ticks

_HISTDATA_LINE = re.compile(r"^\d{8} \d{9},")
_MAP_HINT = "map it in the LoadSpec or choose another preset"


class LoadReport(msgspec.Struct, frozen=True):
    """What a load did: rows read, ticks produced, crossed quotes found and what was done."""

    path: str
    preset: str | None
    kind: str
    rows: int
    ticks: int
    sessions: int
    tick_size: float
    tick_size_inferred: bool
    crossed: int = 0
    crossed_policy: str = "error"
    dropped: int = 0
    spikes: int = 0
    spikes_policy: str = "error"
    spikes_dropped: int = 0
    spike_factor: float = DEFAULT_SPIKE_FACTOR

    def notes(self) -> list[str]:
        out = [f"{self.rows} rows → {self.ticks} ticks in {self.sessions} session{'s' if self.sessions != 1 else ''}"
               + (f" (tick size {self.tick_size:g} inferred)" if self.tick_size_inferred else "")]
        if self.crossed:
            did = f"dropped {self.dropped}" if self.crossed_policy == "drop" else "kept as is"
            out.append(f"{self.crossed} crossed quotes (ask < bid): {did}")
        if self.spikes:
            did = f"dropped {self.spikes_dropped}" if self.spikes_policy == "drop" else "kept as is"
            out.append(f"{self.spikes} price spikes (> {self.spike_factor:g}x from both neighbours): {did}")
        return out


@dataclass(frozen=True, slots=True)
class Loaded:
    data: MarketData
    report: LoadReport


@dataclass(frozen=True, slots=True)
class _Table:
    """Parsed columns by role; `where(i)` names data row i for error messages."""

    path: Path
    ts: I64
    values: dict[str, F64]
    columns: dict[str, str]
    first_line: int | None  # CSV: file line of data row 0; None for Parquet
    index: I64 | None = None  # after rows were dropped: each row's index in the file's data

    def where(self, i: int) -> dict[str, int]:
        return _where(self.first_line, i if self.index is None else int(self.index[i]))

    def keep(self, mask: npt.NDArray[np.bool_]) -> _Table:
        """The rows where `mask` holds (error messages still name their file lines)."""
        index = np.flatnonzero(mask) if self.index is None else self.index[mask]
        return _Table(self.path, self.ts[mask], {k: v[mask] for k, v in self.values.items()},
                      self.columns, self.first_line, index)


_SEPARATED = {",": "comma-separated", ";": "semicolon-separated", "\t": "tab-separated", "|": "pipe-separated"}


def delimiter_hint(d: str) -> str:
    """How to load a file separated by `d`, on the command line and in Python."""
    flag = "tab" if d == "\t" else d
    return f"pass --delimiter '{flag}' (in Python: load(..., delimiter={d!r}))"


def _where(first_line: int | None, i: int) -> dict[str, int]:
    """Data row i as `DataError` keywords: its file line (CSV, data row 0 on `first_line`) or
    its 1-based row (Parquet: `first_line` None)."""
    return {"line": first_line + i} if first_line is not None else {"row": i + 1}


def columns_text(header: list[str]) -> str:
    """A header's columns for a message: printable names as they are, others quoted and cut."""
    if not header or header == [""]:
        return "no columns"
    names = [h if h.isprintable() and len(h) <= 40 else show(h, 40) for h in header[:20]]
    return ", ".join(names) + (f" (and {len(header) - 20} more)" if len(header) > 20 else "")


def show(text: str, width: int = 60) -> str:
    """`text` quoted for a one-line message, cut to `width` characters."""
    return repr(text[:width]) + ("..." if len(text) > width else "")


@contextmanager
def _timestamp_errors(path: Path, column: str, first_line: int | None) -> Iterator[None]:
    """Turn a timestamp parser's `BadValue` (or bad option) into a `DataError` naming the row."""
    try:
        yield
    except BadValue as e:
        raise DataError(path, f"{e.reason}: {show(e.text)}", column=column, **_where(first_line, e.index)) from None
    except ValueError as e:
        raise DataError(path, str(e), column=column) from None


# ------------------------------------------------------------------------------------------
# CSV


def _resolve(path: Path, header: list[str], name: str, role: str) -> int:
    for alt in name.split("|"):
        if alt in header:
            return header.index(alt)
    how = _MAP_HINT
    other = next((d for d in (";", "\t", "|") if len(header) == 1 and d in header[0]), None)
    if other is not None:
        how = f"the header holds {other!r} but no separator of the spec: {delimiter_hint(other)}"
    raise DataError(
        path,
        f"missing column {name!r} needed for {role}; the file has {columns_text(header)}"
        f" ({how})",
        column=name,
    )


def _numbers(path: Path, col: npt.NDArray[np.str_], name: str, first_line: int | None) -> F64:
    try:
        out = np.char.strip(col).astype(np.float64)
    except ValueError:
        for i, s in enumerate(col.tolist()):
            try:
                float(s)
            except ValueError:
                raise DataError(path, f"unparsable number {show(s)}", column=name, **_where(first_line, i)) from None
        raise
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        i = int(bad[0])
        raise DataError(path, f"not a finite number: {show(str(col[i]))}", column=name, **_where(first_line, i))
    return out


def _check_duplicates(path: Path, header: list[str]) -> None:
    seen: dict[str, int] = {}
    for k, name in enumerate(header):
        if name in seen:
            raise DataError(path, f"duplicate column {name!r} in the header (columns {seen[name] + 1} and {k + 1}); "
                            "rename or remove one", column=name)
        seen[name] = k


def _split_header(line: str, d: str) -> list[str]:
    if '"' in line:
        try:
            return [h.strip() for h in next(csv.reader([line], delimiter=d, strict=True))]
        except (csv.Error, StopIteration):
            pass
    return [h.strip() for h in line.split(d)]


def _read_csv(path: Path, spec: LoadSpec) -> _Table:
    raw = path.read_bytes()
    check_text(path, raw[:4096])
    if not raw.strip():
        raise DataError(path, "file is empty: expected a header line and data rows")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    del raw
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    del text
    d = spec.delimiter
    if spec.header:
        header = _split_header(lines[0], d)
        body = lines[1:]
        first = 2
    else:
        if not spec.names:
            raise DataError(path, "a headerless CSV needs column names (LoadSpec.names)")
        header = list(spec.names)
        body = lines
        first = 1
    _check_duplicates(path, header)
    if not body:
        raise DataError(path, "no data rows after the header")
    ncols = len(header)
    ts_i = _resolve(path, header, spec.ts, "timestamps")
    roles = {role: _resolve(path, header, name, role) for role, name in spec.value_columns().items()}
    ts_parts: list[I64] = []
    value_parts: dict[str, list[F64]] = {role: [] for role in roles}
    for start in range(0, len(body), CHUNK_ROWS):  # row chunks: memory stays proportional to the file
        chunk, at = body[start:start + CHUNK_ROWS], first + start
        fields = chunk_fields(path, chunk, d, header, at)
        with _timestamp_errors(path, header[ts_i], at):
            ts_parts.append(parse_timestamps(column_text(path, fields, ts_i, header, at), spec.ts_format, spec.tz))
        for role, j in roles.items():
            value_parts[role].append(_numbers(path, column_text(path, fields, j, header, at), header[j], at))
    ts = np.concatenate(ts_parts)
    values: dict[str, F64] = {role: np.concatenate(parts) for role, parts in value_parts.items()}
    columns: dict[str, str] = {role: header[j] for role, j in roles.items()}
    columns["ts"] = header[ts_i]
    return _Table(path, ts, values, columns, first)


# ------------------------------------------------------------------------------------------
# Parquet


def _one_line(e: BaseException) -> str:
    """A library's error text as one printable line."""
    text = " ".join(str(e).split())
    return "".join(c if c.isprintable() else "?" for c in text)[:200]


def _pyarrow(path: Path) -> tuple[Any, Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(
            path,
            "reading Parquet needs pyarrow, an optional extra: pip install 'kestrel[parquet]'",
        ) from None
    return pa, pc, pq


def _texts(path: Path, col: Any, name: str, pa: Any) -> npt.NDArray[np.str_]:
    """A Parquet column as numpy text (invalid UTF-8 or an unconvertible type: `DataError`)."""
    try:
        out: npt.NDArray[np.str_] = np.asarray(col.cast(pa.string()).to_numpy(zero_copy_only=False)).astype(str)
    except Exception as e:  # pyarrow: invalid UTF-8, an unsupported cast
        raise DataError(path, f"cannot read the column as text: {_one_line(e)}", column=name) from None
    return out


def _read_parquet(path: Path, spec: LoadSpec) -> _Table:
    pa, pc, pq = _pyarrow(path)
    try:
        names = list(pq.read_schema(path).names)
    except Exception as e:  # pyarrow raises several types for a bad file
        raise DataError(path, f"not a readable Parquet file: {_one_line(e)}") from None
    _check_duplicates(path, names)
    ts_name = names[_resolve(path, names, spec.ts, "timestamps")]
    roles = {role: names[_resolve(path, names, n, role)] for role, n in spec.value_columns().items()}
    try:
        table = pq.read_table(path, columns=[ts_name, *dict.fromkeys(roles.values())])
    except Exception as e:  # a damaged column chunk, a bad page, ...
        raise DataError(path, f"not a readable Parquet file: {_one_line(e)}") from None
    if table.num_rows == 0:
        raise DataError(path, "no data rows")

    def check_nulls(col: Any, name: str) -> None:
        if col.null_count:
            i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
            raise DataError(path, "missing value (null)", row=i + 1, column=name)

    tcol = table.column(ts_name).combine_chunks()
    check_nulls(tcol, ts_name)
    if pa.types.is_timestamp(tcol.type):
        try:
            ns = pc.cast(tcol, pa.timestamp("ns", tz=tcol.type.tz))
        except Exception:  # pyarrow: out of bounds for int64 nanoseconds
            raw = np.asarray(tcol.cast(pa.int64()).to_numpy(), dtype=np.int64)
            per_ns = {"s": 10**9, "ms": 10**6, "us": 10**3}.get(tcol.type.unit, 1)
            i = int(np.flatnonzero(np.abs(raw) > np.iinfo(np.int64).max // per_ns)[0])
            when = str(np.datetime64(int(raw[i]), tcol.type.unit))
            raise DataError(path, f"timestamp {when} out of range (timestamps must fall in 1678..2261)",
                            row=i + 1, column=ts_name) from None
        ts = np.asarray(ns.cast(pa.int64()).to_numpy(), dtype=np.int64)
        if tcol.type.tz is None:
            with _timestamp_errors(path, ts_name, None):
                ts = localize(ts, spec.tz)
    else:
        strings = _texts(path, tcol, ts_name, pa)
        with _timestamp_errors(path, ts_name, None):
            ts = parse_timestamps(strings, spec.ts_format, spec.tz)
    values: dict[str, F64] = {}
    for role, name in roles.items():
        col = table.column(name).combine_chunks()
        check_nulls(col, name)
        try:
            arr = np.asarray(col.cast(pa.float64()).to_numpy(), dtype=np.float64)
        except Exception:
            arr = _numbers(path, _texts(path, col, name, pa), name, None)
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            i = int(bad[0])
            raise DataError(path, f"not a finite number: {float(arr[i])}", row=i + 1, column=name)
        values[role] = arr
    roles["ts"] = ts_name
    return _Table(path, ts, values, roles, None)


# ------------------------------------------------------------------------------------------
# assembling ticks


MAX_TICK_DECIMALS = 8
MIN_TICK_SIZE = 1e-12  # a given tick size: from this up to the smallest positive price
_PRICE_ROLES = ("bid", "ask", "price", "open", "high", "low", "close")
_EPS = float(np.finfo(np.float64).eps)


def _on_grid(p: F64, d: int) -> bool:
    scaled = p * 10.0**d
    tol = 16 * _EPS * max(float(np.max(scaled)), 1.0)  # p >= 0: a few ulps of the largest
    return bool(np.max(np.abs(scaled - np.round(scaled))) <= tol)


def _decimals(p: F64) -> int | None:
    """Fewest decimals d <= MAX_TICK_DECIMALS writing every price as a whole multiple of
    10**-d, within float noise (a few ulps of the scaled value); None if none does."""
    return next((d for d in range(MAX_TICK_DECIMALS + 1) if _on_grid(p, d)), None)


def infer_tick_size(prices: F64) -> float:
    """The greatest common step of the price grid: with d the fewest decimals that write every
    price (up to 8), the tick is gcd(prices * 10**d) / 10**d. So CME 6E quoted in steps of
    0.00005 gives 5e-05 (not 1e-05), a quarter-point grid 0.25. Prices needing more than 8
    decimals give 1e-08; a single distinct price gives 10**-d (a grid needs two prices: pass
    the tick size when the file is that sparse). Every price counts: a prefix gives the first
    guess, which one vectorized pass over all prices confirms (or refines)."""
    p = np.abs(prices[np.isfinite(prices)])
    if p.size == 0:
        return 1.0
    head = p[:20_000]
    d = _decimals(head)
    if d is None or not _on_grid(p, d):
        d = _decimals(p)
    if d is None:
        return 10.0**-MAX_TICK_DECIMALS
    ints = np.round(p * 10.0**d).astype(np.int64)
    g = int(np.gcd.reduce(ints[:20_000]))
    if g > 1 and np.any(ints % g):
        g = int(np.gcd.reduce(ints))
    if g == 0 or np.all(ints == ints[0]):  # one price: no step to see, keep the decimal step
        g = 1
    return float(g / 10**d)


def check_tick_grid(t: _Table, tick: float) -> None:
    """Every recorded price must be a whole multiple of `tick` (within float noise)."""
    if not (MIN_TICK_SIZE <= tick and math.isfinite(tick)):
        raise DataError(t.path, f"tick size must be a number >= {MIN_TICK_SIZE:g}, got {tick!r}")
    prices = np.concatenate([v for r, v in t.values.items() if r in _PRICE_ROLES])
    positive = prices[prices > 0]
    if positive.size and tick > float(positive.min()):
        raise DataError(t.path, f"tick size {tick:g} is larger than the smallest price {float(positive.min()):g}: "
                                "give the instrument's real tick size or omit it to infer it")
    for role in _PRICE_ROLES:
        v = t.values.get(role)
        if v is None:
            continue
        q = v / tick
        off = np.flatnonzero(np.abs(q - np.round(q)) > 1e-6 + 64 * _EPS * np.abs(q))
        if off.size:
            i = int(off[0])
            raise DataError(
                t.path,
                f"price {float(v[i])!r} is not a multiple of the tick size {tick:g} ({off.size} "
                f"price{'s' if off.size != 1 else ''} off that grid); give the instrument's real tick size or omit it to infer it "
                f"(inferred: {infer_tick_size(v):g})",
                column=t.columns[role],
                **t.where(i),
            )


def build_sessions(ts: I64, kind: SessionKind) -> tuple[SessionSpec, ...]:
    """Sessions of `kind` that contain at least one tick, in order."""
    if len(ts) == 0:
        return ()

    def make(d: dt.date) -> SessionSpec:
        if kind == "fx":
            return SessionSpec(d, dt.time(17, 0), dt.time(17, 0), "America/New_York")
        if kind == "us_equity":
            return SessionSpec.us_equity(d)
        if kind == "cme":
            return SessionSpec(d, dt.time(17, 0), dt.time(16, 0), "America/Chicago")
        return SessionSpec.around_the_clock(d, "UTC")

    first = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[0] // NS_PER_DAY) - 2)
    last = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[-1] // NS_PER_DAY) + 1)
    out: list[SessionSpec] = []
    d = first
    while d <= last:
        s = make(d)
        lo = int(np.searchsorted(ts, s.open_ns, side="left"))
        hi = int(np.searchsorted(ts, s.close_ns, side="left"))
        if hi > lo:
            out.append(s)
        d += dt.timedelta(days=1)
    return tuple(out)


def _check_monotonic(t: _Table) -> None:
    back = np.flatnonzero(t.ts[1:] < t.ts[:-1])
    if back.size:
        i = int(back[0]) + 1
        a = np.datetime_as_string(t.ts[i - 1 : i + 1].astype("datetime64[ns]"), unit="ms")
        raise DataError(
            t.path,
            f"timestamp goes backwards: {a[1]}Z is before the previous row's {a[0]}Z "
            f"({back.size} such rows); sort the file by time",
            column=t.columns["ts"],
            **t.where(i),
        )


def _check_signs(t: _Table) -> None:
    """Prices must be positive, sizes and volumes not negative."""
    for role, v in t.values.items():
        sized = role in ("size", "volume")
        bad = np.flatnonzero(v < 0 if sized else v <= 0)
        if bad.size:
            i = int(bad[0])
            what = "negative size" if sized else "price not positive"
            rows = f"{bad.size} such row{'s' if bad.size != 1 else ''}"
            raise DataError(t.path, f"{what}: {float(v[i])!r} ({rows})",
                            column=t.columns[role], **t.where(i))


PRICE_ROLES = ("bid", "ask", "price", "open", "high", "low", "close")


def _spikes_in(v: F64, factor: float) -> npt.NDArray[np.bool_]:
    mid, prev, nxt = v[1:-1], v[:-2], v[2:]
    up = (mid > factor * prev) & (mid > factor * nxt)
    down = (mid * factor < prev) & (mid * factor < nxt)
    out: npt.NDArray[np.bool_] = np.concatenate(([False], up | down, [False]))
    return out


def spike_rows(values: dict[str, F64], factor: float) -> npt.NDArray[np.bool_]:
    """Rows where a price jumps by more than `factor` (up or down) from BOTH its neighbours
    in the same column: a one-row excursion that reverts (a fat-finger tick). Rows at the
    ends have one neighbour and are never flagged. Prices are positive here (checked before)."""
    n = len(next(iter(values.values())))
    mask = np.zeros(n, dtype=bool)
    if n >= 3:
        for role in PRICE_ROLES:
            if role in values:
                mask |= _spikes_in(values[role], factor)
    return mask


def _bars_to_ticks(t: _Table, spec: LoadSpec) -> tuple[I64, F64, F64]:
    o, h, lo, c = (t.values[k] for k in ("open", "high", "low", "close"))
    v = t.values.get("volume", np.zeros_like(o))
    bad_h = np.flatnonzero(h < np.maximum(np.maximum(o, c), lo))
    if bad_h.size:
        i = int(bad_h[0])
        raise DataError(t.path, f"inconsistent bar: high {float(h[i])} below open/close/low", column=t.columns["high"], **t.where(i))
    bad_l = np.flatnonzero(lo > np.minimum(o, c))
    if bad_l.size:
        i = int(bad_l[0])
        raise DataError(t.path, f"inconsistent bar: low {float(lo[i])} above open/close", column=t.columns["low"], **t.where(i))
    tf = spec.bar_seconds * NS_PER_S
    close_gap = np.flatnonzero(np.diff(t.ts) < tf)
    if close_gap.size:
        i = int(close_gap[0]) + 1
        raise DataError(t.path, f"bar starts less than bar_seconds={spec.bar_seconds} after the previous one",
                        column=t.columns["ts"], **t.where(i))
    bull = c >= o
    px = np.stack([o, np.where(bull, lo, h), np.where(bull, h, lo), c], axis=1).reshape(-1)
    offs = np.array([0, tf // 4, tf // 2, 3 * tf // 4], dtype=np.int64)
    ts = (t.ts[:, None] + offs[None, :]).reshape(-1)
    return ts, px, np.repeat(v / 4.0, 4)


def _assemble(t: _Table, spec: LoadSpec, crossed: CrossedPolicy, preset_name: str | None,
              symbol: str | None, tick_size: float | None, spikes: SpikePolicy = "error",
              spike_factor: float = DEFAULT_SPIKE_FACTOR, multiplier: float | None = None,
              currency: str | None = None) -> Loaded:
    rows = len(t.ts)
    _check_monotonic(t)
    _check_signs(t)
    if not (spike_factor > 1 and math.isfinite(spike_factor)):
        raise ValueError(f"spike factor must be a number > 1, got {spike_factor!r}")
    spiky = spike_rows(t.values, spike_factor)
    n_spikes = int(spiky.sum())
    spikes_dropped = 0
    if n_spikes:
        if spikes == "error":
            i = int(np.flatnonzero(spiky)[0])
            role = next(r for r in PRICE_ROLES if r in t.values and _spikes_in(t.values[r], spike_factor)[i])
            v = t.values[role]
            raise DataError(
                t.path,
                f"price spike: {float(v[i])!r} between {float(v[i - 1])!r} and {float(v[i + 1])!r} (more than "
                f"{spike_factor:g}x from both neighbours); {n_spikes} such row{'s' if n_spikes != 1 else ''}; "
                "pass spikes='drop' or 'keep' (CLI --spikes drop|keep) or a larger spike factor (--spike-factor)",
                column=t.columns[role],
                **t.where(i),
            )
        if spikes == "drop":
            t = t.keep(~spiky)
            spikes_dropped = n_spikes
    n_crossed = dropped = 0
    if spec.kind == "quotes":
        bid, ask = t.values["bid"], t.values["ask"]
        ts = t.ts
        bad = np.flatnonzero(ask < bid)
        n_crossed = int(bad.size)
        if n_crossed:
            if crossed == "error":
                i = int(bad[0])
                raise DataError(
                    t.path,
                    f"crossed quote: ask {float(ask[i])} < bid {float(bid[i])}; {n_crossed} of {rows} rows are crossed "
                    f"({100.0 * n_crossed / rows:.1f}%); pass crossed='drop' or 'keep' (CLI --crossed drop|keep)",
                    column=t.columns["ask"],
                    **t.where(i),
                )
            if crossed == "drop":
                keep = ask >= bid
                ts, bid, ask = ts[keep], bid[keep], ask[keep]
                dropped = n_crossed
        last = (bid + ask) / 2.0
        size = np.zeros_like(bid)
        prices = np.concatenate((bid, ask))
    elif spec.kind == "trades":
        ts, last = t.ts, t.values["price"]
        bid = ask = last
        size = t.values.get("size", np.zeros_like(last))
        prices = last
    else:
        ts, last, size = _bars_to_ticks(t, spec)
        bid = ask = last
        prices = np.concatenate([t.values[k] for k in ("open", "high", "low", "close")])
    inferred = tick_size is None and spec.tick_size is None
    tick = tick_size if tick_size is not None else spec.tick_size
    if tick is None:
        tick = infer_tick_size(prices)
    else:
        check_tick_grid(t, float(tick))
    ticks = Ticks(ts, bid, ask, last, np.ascontiguousarray(size, dtype=np.float64))
    sessions = build_sessions(ts, spec.session)
    sym = symbol or spec.symbol
    try:
        instrument = Instrument(symbol=sym, tick_size=float(tick),
                                multiplier=spec.multiplier if multiplier is None else float(multiplier),
                                currency=spec.currency if currency is None else currency,
                                min_qty=spec.min_qty)
    except ValueError as e:
        raise DataError(t.path, str(e)) from None
    data = MarketData(sym, float(tick), ticks, sessions,
                      crossed_kept=crossed == "keep" and n_crossed > 0, instrument=instrument)
    report = LoadReport(
        path=str(t.path), preset=preset_name, kind=spec.kind, rows=rows, ticks=len(ticks),
        sessions=len(sessions), tick_size=float(tick), tick_size_inferred=inferred,
        crossed=n_crossed, crossed_policy=crossed, dropped=dropped,
        spikes=n_spikes, spikes_policy=spikes, spikes_dropped=spikes_dropped, spike_factor=spike_factor,
    )
    return Loaded(data, report)


# ------------------------------------------------------------------------------------------
# public API


def _first_line(path: Path) -> str:
    with path.open("rb") as f:
        return f.readline(4096).decode("utf-8-sig", errors="replace").strip()


def detect_preset(path: str | Path, delimiter: str = ",") -> str:
    """Guess the preset from the file's columns (Parquet schema or CSV header)."""
    p = Path(path)
    if p.suffix.lower() == ".parquet":
        _, _, pq = _pyarrow(p)
        try:
            header = list(pq.read_schema(p).names)
        except Exception as e:
            raise DataError(p, f"not a readable Parquet file: {_one_line(e)}") from None
    else:
        with p.open("rb") as f:
            head = f.read(4096)
        check_text(p, head)
        try:
            head.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            if e.start < len(head) - 3:  # not just a character cut at the 4096-byte edge
                raise DataError(p, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
        line = _first_line(p)
        if not head.strip():
            raise DataError(p, "file is empty: expected a header line and data rows")
        if _HISTDATA_LINE.match(line):
            return "histdata"
        header = _split_header(line, delimiter)
        other = next((d for d in (";", "\t", "|") if len(header) == 1 and d in header[0]), None)
        if other is not None:
            raise DataError(p, f"the header holds {other!r} but no {delimiter!r}: the file is not "
                            f"{_SEPARATED.get(delimiter, repr(delimiter) + '-separated')}; {delimiter_hint(other)}")
    for name, spec in PRESETS.items():
        if not spec.header:
            continue
        need = [spec.ts, *spec.value_columns().values()]
        if all(any(a in header for a in n.split("|")) for n in need):
            return name
    shown = columns_text(header)
    raise DataError(
        p, f"no preset matches columns {shown}; pass a preset ({', '.join(sorted(PRESETS))}) "
        "or a LoadSpec with a column mapping"
    )


def load(
    path: str | Path,
    preset_name: str | None = None,
    *,
    spec: LoadSpec | None = None,
    crossed: CrossedPolicy = "error",
    symbol: str | None = None,
    tick_size: float | None = None,
    spikes: SpikePolicy = "error",
    spike_factor: float = DEFAULT_SPIKE_FACTOR,
    multiplier: float | None = None,
    currency: str | None = None,
    delimiter: str | None = None,
) -> Loaded:
    """Load a CSV or Parquet file (by extension) with a preset, an explicit spec, or a preset
    detected from its columns; `delimiter` overrides the spec's field separator (`;`, tab).
    Raises `DataError` on bad input."""
    p = Path(path)
    if not p.is_file():
        raise DataError(p, "is a directory, not a data file" if p.is_dir()
                        else "not a regular file" if p.exists() else "no such file")
    if crossed not in ("error", "drop", "keep"):
        raise ValueError(f"crossed policy must be error, drop or keep, got {crossed!r}")
    if spikes not in ("error", "drop", "keep"):
        raise ValueError(f"spikes policy must be error, drop or keep, got {spikes!r}")
    if spec is None:
        try:
            preset_name = preset_name or detect_preset(p, delimiter or ",")
            spec = preset(preset_name)
        except ValueError as e:
            if isinstance(e, DataError):
                raise
            raise DataError(p, str(e)) from None
    if delimiter is not None:
        spec = msgspec.structs.replace(spec, delimiter=delimiter)
    table = _read_parquet(p, spec) if p.suffix.lower() == ".parquet" else _read_csv(p, spec)
    return _assemble(table, spec, crossed, preset_name, symbol, tick_size, spikes, spike_factor,
                     multiplier, currency)


def load_market_data(path: str | Path, preset_name: str | None = None, **options: Any) -> MarketData:
    """`load(...)` returning only the data."""
    return load(path, preset_name, **options).data
