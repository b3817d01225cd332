"""CSV text checked, and CSV rows to fields and columns, a chunk of rows at a time, with every
size bounded.

`check_text` refuses binary data (compressed, archives, NUL bytes) without echoing its bytes;

`chunk_fields` splits lines into row-major fields (the stdlib `csv` module when a quote is
present; a wrong field count or bad quoting is a `DataError` naming the line); `column_text`
takes one column as a fixed-width numpy text array after checking that no field is longer than
`MAX_FIELD_CHARS` (the array is rows x widest field x 4 bytes, so one huge field would need
gigabytes). The loader converts `CHUNK_ROWS` rows at a time, so its memory stays proportional to
the file.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kestrel.data.errors import DataError

_BINARY_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed data: decompress it first (gunzip)"),
    (b"PK\x03\x04", "a zip archive: extract the CSV first"),
    (b"PAR1", "Parquet data: give the file a .parquet extension"),
    (b"\xfd7zXZ", "xz-compressed data: decompress it first"),
    (b"BZh", "bzip2-compressed data: decompress it first"),
)


def check_text(path: Path, head: bytes) -> None:
    """Refuse binary data before it is read as text: the message names what it looks like
    and never echoes the bytes."""
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            raise DataError(path, f"not a CSV text file: {what}")
    if b"\x00" in head:
        raise DataError(path, "not a CSV text file: it holds NUL bytes (binary data?)")


def quoted_rows(path: Path, lines: list[str], d: str, ncols: int, first: int) -> list[list[str]]:
    """Rows of a file with quoted fields, via the csv module (a quote may hold the delimiter)."""
    rows: list[list[str]] = []
    reader = csv.reader(lines, delimiter=d, quotechar='"', strict=True)
    try:
        for i, row in enumerate(reader):
            if reader.line_num != i + 1:
                raise DataError(path, "unclosed quote: a quoted field runs past the end of the line",
                                line=first + i)
            if len(row) != ncols:
                raise DataError(path, f"expected {ncols} fields, found {len(row)}", line=first + i)
            rows.append([f.strip() for f in row])
    except csv.Error as e:
        raise DataError(path, f"bad CSV quoting ({e})", line=first + len(rows)) from None
    return rows


CHUNK_ROWS = 1 << 18  # CSV rows converted at a time
MAX_FIELD_CHARS = 64  # a timestamp or number field is never longer


def _header_text(header: list[str], d: str, width: int = 120) -> str:
    """The header for a message, cut to `width` characters (a header may have millions)."""
    from kestrel.data.bounds import read_limits

    if not read_limits().echo:
        return f"{len(header)} columns"
    text = d.join(header[:64])
    return text if len(text) <= width and len(header) <= 64 else text[:width] + "..."


def chunk_fields(path: Path, chunk: list[str], d: str, header: list[str], at: int) -> list[str]:
    """The fields of `chunk` (lines from file line `at`), row after row; a wrong field count
    or bad quoting is a `DataError` naming the line."""
    ncols = len(header)
    if any('"' in line for line in chunk):
        return [f for row in quoted_rows(path, chunk, d, ncols, at) for f in row]
    fields = d.join(chunk).split(d)
    if len(fields) != len(chunk) * ncols:
        for i, line in enumerate(chunk):
            k = line.count(d) + 1
            if k != ncols:
                raise DataError(path, f"expected {ncols} fields ({_header_text(header, d)}), found {k}", line=at + i)
    return fields


def column_text(path: Path, fields: list[str], j: int, header: list[str], at: int) -> npt.NDArray[np.str_]:
    """Column `j` of row-major `fields` as a fixed-width numpy text array. A field longer than
    `MAX_FIELD_CHARS` is a `DataError` naming its line, checked first: the array's width is its
    widest field, so one huge field would otherwise cost rows x width x 4 bytes."""
    col = fields[j::len(header)]
    if col and max(map(len, col)) > MAX_FIELD_CHARS:
        i = next(k for k, f in enumerate(col) if len(f) > MAX_FIELD_CHARS)
        raise DataError(path, f"a field of {len(col[i]):,} characters: a timestamp or number has at most "
                              f"{MAX_FIELD_CHARS}", line=at + i, column=header[j])
    return np.array(col, dtype=str)


__all__ = ["CHUNK_ROWS", "MAX_FIELD_CHARS", "check_text", "chunk_fields", "column_text", "quoted_rows"]
