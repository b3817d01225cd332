"""The sweep's results table: one row per run, in the grid's order, as CSV and Parquet.

Columns: the run (key, agent, model, profile, data, data_sha256, dates, checkpoints, repeat,
seed, temperature, arm_latency: `measured`, the seconds, or empty when off; blind: whether the
run was in blind mode; news: the news file's name and the first 12 hex digits of its SHA-256,
`NAME@SHA`, or empty without one), every metric of `kestrel.report.Metrics` (`cost_usd`: the model's dollars),
the currency of its PnL and `net_of_cost` (net PnL minus the model's dollars; empty unless the
PnL is in USD), the equal-size buy-and-hold of its sessions (`buy_and_hold_net_pnl`,
`buy_and_hold_return_on_risk`: from the data and the execution model alone, the reference
agent's records summed; `kestrel.report.stats.baselines`), `leakage` (`in-sample`, `post-cutoff`, `unknown`, `generated`;
empty for agents that are not models) and its `leakage_note`, `spending_cap` ("run": the run's
own cap stood an ordinal down; "sweep": the sweep's cap cut it), `ledger_sha256`, `failure`
(`fatal`, `every-call-failed`, `error`) and `error` (the reason; None for a finished run).
Finished runs are read back from `runs/KEY/result.json`, failed ones from `failed/KEY.json`
(what a failed run recorded is in `failed/KEY/`).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from kestrel.report.stats.board import SESSION_COLUMNS, Board, session_rows
from kestrel.report.stats.board import to_csv as table_csv
from kestrel.report.metrics import Metrics
from kestrel.report.stats import SessionRecord
from kestrel.sweep.worker import BASELINE_METRICS, RESULT, SESSIONS, SessionsFile

RUN_COLUMNS = ("key", "agent", "model", "profile", "data", "data_sha256", "dates", "checkpoints", "repeat", "seed",
               "temperature", "arm_latency", "blind", "news")
BASELINE_COLUMNS = tuple(f"buy_and_hold_{m}" for m in BASELINE_METRICS)
COLUMNS: tuple[str, ...] = (RUN_COLUMNS + tuple(Metrics.__struct_fields__) + ("currency", "net_of_cost")
                            + BASELINE_COLUMNS + ("leakage", "leakage_note", "spending_cap", "ledger_sha256",
                                                  "failure", "error"))


def finished(out: Path, key: str) -> dict[str, Any] | None:
    """The stored row of a finished run, or None."""
    p = out / "runs" / key / RESULT
    try:
        row: dict[str, Any] = msgspec.json.decode(p.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return row


def record_failure(out: Path, row: dict[str, Any]) -> None:
    d = out / "failed"
    d.mkdir(parents=True, exist_ok=True)
    _atomic(d / f"{row['key']}.json", msgspec.json.encode(row, order="deterministic") + b"\n")


def clear_failure(out: Path, key: str) -> None:
    """The run finished: forget an earlier attempt's failure (its row and its files)."""
    try:
        (out / "failed" / f"{key}.json").unlink()
    except FileNotFoundError:
        pass
    shutil.rmtree(out / "failed" / key, ignore_errors=True)


def stored_rows(out: Path) -> list[dict[str, Any]]:
    """Every finished and failed run stored under `out` (finished first, each by key)."""
    rows: list[dict[str, Any]] = []
    runs = out / "runs"
    if runs.is_dir():
        for d in sorted(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")):
            r = finished(out, d.name)
            if r is not None:
                rows.append(r)
    failed = out / "failed"
    if failed.is_dir():
        done = {r["key"] for r in rows}
        for f in sorted(failed.glob("*.json")):
            try:
                r = msgspec.json.decode(f.read_bytes())
            except msgspec.DecodeError:
                continue
            if r.get("key") not in done:
                rows.append(r)
    return rows


def stored_records(out: Path, keys: Sequence[str]) -> list[SessionRecord]:
    """The per-session records of the finished runs `keys` and the reference agents' records of
    their sessions (each session's once: they do not depend on the run)."""
    decoder = msgspec.json.Decoder(SessionsFile)
    records: list[SessionRecord] = []
    refs: dict[tuple[str, str, str], SessionRecord] = {}
    for key in keys:
        try:
            f = decoder.decode((out / "runs" / key / SESSIONS).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        records += f.records
        for r in f.baselines:
            refs.setdefault((r.agent, r.data, r.date), r)
    return records + [refs[k] for k in sorted(refs)]


def write_board_tables(out: Path, board: Board, records: Sequence[SessionRecord]) -> list[str]:
    """`cells`, `comparisons` and `sessions` as CSV (and Parquet when pyarrow is installed)."""
    tables = dict(board.tables())
    tables["sessions"] = (SESSION_COLUMNS, session_rows(records))
    written: list[str] = []
    for name, (columns, rows) in tables.items():
        _atomic(out / f"{name}.csv", table_csv(columns, rows))
        written.append(str(out / f"{name}.csv"))
        written += _parquet(out / f"{name}.parquet", columns, rows)
    return written


def _parquet(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> list[str]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return []
    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows],
                                 schema=pa.schema([pa.field(c, _arrow_type(pa, [r.get(c) for r in rows]))
                                                   for c in columns]))
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return [str(path)]


def _arrow_type(pa: Any, values: Sequence[Any]) -> Any:
    seen = {type(v) for v in values if v is not None}
    if seen <= {bool} and seen:
        return pa.bool_()
    if seen <= {int} and seen:
        return pa.int64()
    if seen <= {int, float} and seen:
        return pa.float64()
    return pa.string()


def normalized(row: dict[str, Any]) -> dict[str, Any]:
    return {c: row.get(c) for c in COLUMNS}


def to_csv(rows: Sequence[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in COLUMNS])
    return buf.getvalue().encode()


def write_tables(out: Path, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Write `results.csv` and (when pyarrow is installed) `results.parquet`; returns the paths."""
    rows = [normalized(r) for r in rows]
    _atomic(out / "results.csv", to_csv(rows))
    written = [str(out / "results.csv")]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    table = pa.Table.from_pylist(rows, schema=_schema(pa))
    tmp = out / ".results.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, out / "results.parquet")
    written.append(str(out / "results.parquet"))
    return written


def _schema(pa: Any) -> Any:
    ints = {"periods_per_year", "max_drawdown_ts", "trades", "wins", "losses", "orders", "fills", "rejections",
            "disarms", "tokens", "repeat", "seed"}
    strs = (set(RUN_COLUMNS) - {"repeat", "seed", "temperature", "blind"}) | {"currency", "leakage", "leakage_note",
                                                                     "spending_cap", "ledger_sha256", "failure",
                                                                     "error"}
    fields = [pa.field(c, pa.bool_() if c == "blind" else pa.string() if c in strs else pa.int64() if c in ints
                       else pa.float64()) for c in COLUMNS]
    return pa.schema(fields)


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


__all__ = ["BASELINE_COLUMNS", "COLUMNS", "clear_failure", "finished", "normalized", "record_failure",
           "stored_records", "stored_rows", "to_csv", "write_board_tables", "write_tables"]
