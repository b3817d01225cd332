"""Load errors that name the file, the row and the column."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """Bad input data. The message names the file and, where known, the line (CSV, 1-based,
    counting the header) or row (Parquet, 1-based), the column, what was wrong and how to fix it."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.row = row
        self.column = column
        where = [self.path]
        if line is not None:
            where.append(f"line {line}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(", ".join(where) + ": " + message)
