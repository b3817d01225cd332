"""Readers: a CSV or Parquet file into a `Table` of columns by role, and the preset a file's
columns match (`detect_preset`).

Parsing is vectorized (numpy for CSV, pyarrow for Parquet); Python loops run only on the
error path, to name the first bad row. Checks, each a `DataError` naming file, line/row and
column: empty file, missing column, wrong field count, unparsable or non-finite number,
unparsable timestamp.

Bounds (`ReadLimits`, set for the current context with `bounded_reads`): a server that loads
files for its clients sets them around each load, so a file is measured before it is read —
its size from the open file, a Parquet file's rows, columns and decoded bytes from its footer,
a CSV header's columns before it is split — and refused with one line when over. With no
bounds set (the CLI, the library) files of any size are read. Error texts never hold more than
a few dozen characters of a column name or a field.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from kestrel.data.columns import ALIASES, ColumnError, ColumnMap, column_spec, columns_text, infer_roles, normalize
from kestrel.data.bounds import ReadLimits, bounded_reads, read_limits
from kestrel.data.csvfields import CHUNK_ROWS, check_text, chunk_fields, column_text
from kestrel.data.errors import DataError
from kestrel.data.spec import PRESETS, LoadSpec
from kestrel.data.timestamps import BadValue, localize, parse_timestamps
from kestrel.market.ticks import F64, I64

_HISTDATA_LINE = re.compile(r"^\d{8} \d{9},")
_MAP_HINT = "map it in the LoadSpec or choose another preset"


def _over(path: Path, what: str, count: int, limit: int) -> DataError:
    return DataError(path, f"{what} {count:,} is over the limit of {limit:,} for one load here")


def check_size(path: Path, fd: int | None = None) -> int:
    """The size of `path` (of the open `fd` when given), refused when over `max_bytes` or, for
    a bounded load, when it is not a regular file (a FIFO or device would block or never end;
    the CLI, unbounded, still reads a pipe such as `<(...)`)."""
    st = os.fstat(fd) if fd is not None else os.stat(path)
    lim = read_limits().max_bytes
    if lim is not None and not stat.S_ISREG(st.st_mode):
        raise DataError(path, "not a regular file")
    if lim is not None and st.st_size > lim:
        raise _over(path, "file size in bytes", st.st_size, lim)
    return st.st_size


def _open(path: Path) -> BinaryIO:
    """`path` opened for reading; for a bounded load without blocking on the open (a FIFO put
    where a file was checked opens at once, and is then refused as not a regular file)."""
    if read_limits().max_bytes is None:
        return path.open("rb")
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb")


def read_bytes(path: Path) -> bytes:
    """The file's bytes, its size checked first (`check_size`); a file that reads longer than
    its size says is refused at the bound rather than read to its end."""
    with _open(path) as f:
        check_size(path, f.fileno())
        lim = read_limits().max_bytes
        raw = f.read() if lim is None else f.read(lim + 1)
    if lim is not None and len(raw) > lim:
        raise DataError(path, f"file reads longer than the limit of {lim:,} bytes for one load here")
    return raw


@dataclass(frozen=True, slots=True)
class Table:
    """Parsed columns by role; `where(i)` names data row i for error messages; `symbols` holds
    each row's symbol when the spec names a symbol column (a long-format file)."""

    path: Path
    ts: I64
    values: dict[str, F64]
    columns: dict[str, str]
    first_line: int | None  # CSV: file line of data row 0; None for Parquet
    index: I64 | None = None  # after rows were dropped: each row's index in the file's data
    symbols: npt.NDArray[np.str_] | None = None

    def where(self, i: int) -> dict[str, int]:
        return row_where(self.first_line, i if self.index is None else int(self.index[i]))

    def keep(self, mask: npt.NDArray[np.bool_]) -> Table:
        """The rows where `mask` holds (error messages still name their file lines)."""
        index = np.flatnonzero(mask) if self.index is None else self.index[mask]
        return Table(self.path, self.ts[mask], {k: v[mask] for k, v in self.values.items()},
                      self.columns, self.first_line, index,
                      None if self.symbols is None else self.symbols[mask])


def row_where(first_line: int | None, i: int) -> dict[str, int]:
    """Data row i as `DataError` keywords: its file line (CSV, data row 0 on `first_line`) or
    its 1-based row (Parquet: `first_line` None)."""
    return {"line": first_line + i} if first_line is not None else {"row": i + 1}


def show(text: str, width: int = 60) -> str:
    """`text` (from the file) quoted for a one-line message, cut to `width` characters; only
    its length when messages may not quote the file (`ReadLimits.echo`)."""
    if not read_limits().echo:
        return f"(a value of {len(text)} characters, not shown here)"
    return repr(text[:width]) + ("..." if len(text) > width else "")


@contextmanager
def _timestamp_errors(path: Path, column: str, first_line: int | None) -> Iterator[None]:
    """Turn a timestamp parser's `BadValue` (or bad option) into a `DataError` naming the row."""
    try:
        yield
    except BadValue as e:
        raise DataError(path, f"{e.reason}: {show(e.text)}", column=column, **row_where(first_line, e.index)) from None
    except ValueError as e:
        raise DataError(path, str(e), column=column) from None


# ------------------------------------------------------------------------------------------
# CSV


_SEPARATED = {",": "comma-separated", ";": "semicolon-separated", "\t": "tab-separated", "|": "pipe-separated"}


def delimiter_hint(d: str) -> str:
    """How to load a file separated by `d`, on the command line and in Python."""
    flag = "tab" if d == "\t" else d
    return f"pass --delimiter '{flag}' (in Python: load(..., delimiter={d!r}))"


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
                raise DataError(path, f"unparsable number {show(s)}", column=name, **row_where(first_line, i)) from None
        raise
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        i = int(bad[0])
        raise DataError(path, f"not a finite number: {show(str(col[i]))}", column=name, **row_where(first_line, i))
    return out


def _check_duplicates(path: Path, header: list[str]) -> None:
    seen: dict[str, int] = {}
    for k, name in enumerate(header):
        if name in seen:
            raise DataError(path, f"duplicate column {show(name, 40)} in the header (columns {seen[name] + 1} "
                            f"and {k + 1}); rename or remove one",
                            column=name if len(name) <= 40 and read_limits().echo else None)
        seen[name] = k


def _split_header(line: str, d: str) -> list[str]:
    if '"' in line:
        try:
            return [h.strip() for h in next(csv.reader([line], delimiter=d, strict=True))]
        except (csv.Error, StopIteration):
            pass
    return [h.strip() for h in line.split(d)]


def _check_columns(path: Path, count: int) -> None:
    lim = read_limits().max_columns
    if lim is not None and count > lim:
        raise _over(path, "number of columns", count, lim)


def read_csv(path: Path, spec: LoadSpec) -> Table:
    raw = read_bytes(path)
    check_text(path, raw[:4096])
    if not raw.strip():
        raise DataError(path, "file is empty: expected a header line and data rows")
    limits = read_limits()
    if limits.max_rows is not None:  # counted on the bytes, before a line is made of them
        rows = raw.rstrip(b"\r\n").count(b"\n") + 1 - int(spec.header)  # at most the rows split below
        if rows > limits.max_rows:
            raise _over(path, "number of data rows", rows, limits.max_rows)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    del raw
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    del text
    d = spec.delimiter
    if limits.max_rows is not None and len(lines) - int(spec.header) > limits.max_rows:
        raise _over(path, "number of data rows", len(lines) - int(spec.header), limits.max_rows)
    if spec.header:
        _check_columns(path, lines[0].count(d) + 1)  # before the header is split
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
    ts_i = _resolve(path, header, spec.ts, "timestamps")
    roles = {role: _resolve(path, header, name, role) for role, name in spec.value_columns().items()}
    sym_i = None if spec.symbols is None else _resolve(path, header, spec.symbols, "symbols")
    sym_parts: list[npt.NDArray[np.str_]] = []
    ts_parts: list[I64] = []
    value_parts: dict[str, list[F64]] = {role: [] for role in roles}
    for start in range(0, len(body), CHUNK_ROWS):  # row chunks: memory stays proportional to the file
        chunk, at = body[start:start + CHUNK_ROWS], first + start
        fields = chunk_fields(path, chunk, d, header, at)
        with _timestamp_errors(path, header[ts_i], at):
            ts_parts.append(parse_timestamps(column_text(path, fields, ts_i, header, at), spec.ts_format, spec.tz))
        for role, j in roles.items():
            value_parts[role].append(_numbers(path, column_text(path, fields, j, header, at), header[j], at))
        if sym_i is not None:
            sym_parts.append(_symbols(path, np.char.strip(column_text(path, fields, sym_i, header, at)),
                                      header[sym_i], at))
    ts = np.concatenate(ts_parts)
    values: dict[str, F64] = {role: np.concatenate(parts) for role, parts in value_parts.items()}
    columns: dict[str, str] = {role: header[j] for role, j in roles.items()}
    columns["ts"] = header[ts_i]
    symbols = None
    if sym_i is not None:
        symbols = np.concatenate(sym_parts)
        columns["symbol"] = header[sym_i]
    return Table(path, ts, values, columns, first, symbols=symbols)


def _symbols(path: Path, col: npt.NDArray[np.str_], name: str, first_line: int | None) -> npt.NDArray[np.str_]:
    """A symbol column: every value non-empty and printable (an empty one names its row)."""
    bad = np.flatnonzero(np.char.str_len(col) == 0)
    if bad.size:
        raise DataError(path, "empty symbol", column=name, **row_where(first_line, int(bad[0])))
    return col


# ------------------------------------------------------------------------------------------
# Parquet


def _one_line(e: BaseException) -> str:
    """A library's error text as one printable line (its type only when messages may not quote
    the file: the text may hold the file's bytes)."""
    if not read_limits().echo:
        return type(e).__name__
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


def _parquet_names(path: Path, pq: Any) -> tuple[list[str], Any]:
    """The schema's column names and the file's footer, the bounds checked on the footer
    before any column is read."""
    check_size(path)
    try:
        meta = pq.read_metadata(path)
    except Exception as e:  # pyarrow raises several types for a bad file
        raise DataError(path, f"not a readable Parquet file: {_one_line(e)}") from None
    _check_columns(path, int(meta.num_columns))
    limits = read_limits()
    if limits.max_rows is not None and meta.num_rows > limits.max_rows:
        raise _over(path, "number of data rows", int(meta.num_rows), limits.max_rows)
    try:
        names = list(meta.schema.to_arrow_schema().names)
    except Exception as e:
        raise DataError(path, f"not a readable Parquet file: {_one_line(e)}") from None
    return names, meta


def _check_decoded(path: Path, meta: Any, columns: list[str]) -> None:
    lim = read_limits().max_decoded_bytes
    if lim is None:
        return
    wanted = set(columns)
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            if col.path_in_schema.split(".")[0] in wanted:
                total += int(col.total_uncompressed_size)
    if total > lim:
        raise _over(path, "decoded size in bytes of the columns read", total, lim)


def read_parquet(path: Path, spec: LoadSpec) -> Table:
    pa, pc, pq = _pyarrow(path)
    names, meta = _parquet_names(path, pq)
    _check_duplicates(path, names)
    ts_name = names[_resolve(path, names, spec.ts, "timestamps")]
    roles = {role: names[_resolve(path, names, n, role)] for role, n in spec.value_columns().items()}
    sym_name = None if spec.symbols is None else names[_resolve(path, names, spec.symbols, "symbols")]
    wanted = [ts_name, *roles.values(), *([sym_name] if sym_name else [])]
    _check_decoded(path, meta, wanted)
    try:
        table = pq.read_table(path, columns=list(dict.fromkeys(wanted)))
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
    symbols = None
    if sym_name is not None:
        scol = table.column(sym_name).combine_chunks()
        check_nulls(scol, sym_name)
        symbols = _symbols(path, np.char.strip(_texts(path, scol, sym_name, pa)), sym_name, None)
        roles["symbol"] = sym_name
    return Table(path, ts, values, roles, None, symbols=symbols)


def _first_line(path: Path) -> str:
    with path.open("rb") as f:
        return f.readline(4096).decode("utf-8-sig", errors="replace").strip()


def pick_preset(matches: list[str], path: Path) -> str:
    """The preset recorded for a file whose columns match every preset in `matches` (in
    `PRESETS` order): the one its file name names when exactly one does (Lean's OANDA and FXCM
    files have the same columns: `lean_fxcm_eurusd_...parquet` is `fxcm`), else the first."""
    named = [m for m in matches if m.lower() in path.name.lower()]
    return named[0] if len(named) == 1 else matches[0]


def file_header(path: str | Path, delimiter: str = ",") -> list[str] | None:
    """The file's column names (Parquet schema or CSV header); None for a headerless HistData
    file. Binary data, non-UTF-8 text, an empty file and a header split by another separator
    are a `DataError`."""
    p = Path(path)
    if p.suffix.lower() == ".parquet":
        _, _, pq = _pyarrow(p)
        header, _ = _parquet_names(p, pq)
        return header
    with _open(p) as f:
        check_size(p, f.fileno())
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
        return None
    header = _split_header(line, delimiter)
    other = next((d for d in (";", "\t", "|") if len(header) == 1 and d in header[0]), None)
    if other is not None:
        raise DataError(p, f"the header holds {other!r} but no {delimiter!r}: the file is not "
                        f"{_SEPARATED.get(delimiter, repr(delimiter) + '-separated')}; {delimiter_hint(other)}")
    return header


def preset_for(header: list[str] | None, path: Path | None = None) -> str | None:
    """The preset whose columns the header holds (`histdata` for a headerless HistData file;
    when several do, the file name of `path` decides: `pick_preset`); None when none does or the
    header has a symbol column (no preset reads one)."""
    if header is None:
        return "histdata"
    if any(normalize(h) in ALIASES["symbol"] for h in header):
        return None
    matches = [name for name, spec in PRESETS.items() if spec.header
               and all(any(a in header for a in n.split("|")) for n in [spec.ts, *spec.value_columns().values()])]
    if not matches:
        return None
    return matches[0] if path is None else pick_preset(matches, path)


def detect_preset(path: str | Path, delimiter: str = ",") -> str:
    """Guess the preset from the file's columns (Parquet schema or CSV header); when several
    presets share those columns, the file name decides (`pick_preset`)."""
    p = Path(path)
    header = file_header(p, delimiter)
    name = preset_for(header, p)
    if name is not None:
        return name
    shown = columns_text(header or [])
    raise DataError(
        p, f"no preset matches columns {shown}; pass a preset ({', '.join(sorted(PRESETS))}) "
        "or a LoadSpec with a column mapping"
    )


def detect_spec(path: str | Path, delimiter: str = ",", columns: ColumnMap | None = None,
                **options: Any) -> tuple[str | None, LoadSpec]:
    """(preset name, spec) for a file: with a column mapping, or when no preset matches its
    columns, the spec of the roles inferred from its header (`kestrel.data.columns`, with the
    `LoadSpec` fields of `options`); else the preset's. A header without the roles of any
    kind is a `DataError` naming its columns, the presets and `--columns`."""
    p = Path(path)
    header = file_header(p, delimiter)
    name = None if columns is not None else preset_for(header, p)
    if name is not None:
        return name, PRESETS[name]
    if header is None:
        raise DataError(p, "a headerless file: --columns needs a header line naming the columns")
    try:
        roles = infer_roles(header, columns)
    except ColumnError as e:
        tail = "" if columns is not None else f"; or pass a preset ({', '.join(sorted(PRESETS))})"
        raise DataError(p, f"{e}{tail}") from None
    return None, column_spec(roles, delimiter=delimiter, **options)


def read_table(path: Path, spec: LoadSpec) -> Table:
    """The file's columns by role: Parquet by its extension, else CSV."""
    return read_parquet(path, spec) if path.suffix.lower() == ".parquet" else read_csv(path, spec)


__all__ = [
    "ReadLimits",
    "Table",
    "bounded_reads",
    "check_size",
    "check_text",
    "columns_text",
    "delimiter_hint",
    "detect_preset",
    "detect_spec",
    "file_header",
    "preset_for",
    "pick_preset",
    "read_bytes",
    "read_csv",
    "read_limits",
    "read_parquet",
    "read_table",
    "row_where",
    "show",
]
