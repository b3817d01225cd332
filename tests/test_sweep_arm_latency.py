"""The sweep's results table records each run's arm latency (`arm_latency`: `measured`, the
seconds, or empty when off) in results.csv and results.parquet; the setting is in the run's key,
so each setting is its own run, and a rerun of the same grid resumes every run (none run again)
with the column as it was."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli

SETTINGS = (("12.5", "12.5"), ("measured", "measured"), ("0", "0"), (None, ""))


def _sweep(capsys: pytest.CaptureFixture[str], out: Path, latency: str | None) -> dict[str, Any]:
    flags = ["sweep", "--agents", "baseline", "--days", "1", "--checkpoints", "11:00", "--out", str(out), "--json"]
    code, text, err = run_cli(capsys, *flags, *(["--arm-latency", latency] if latency is not None else []))
    assert code == 0, err
    doc: dict[str, Any] = json.loads(text)
    return doc


def _column(out: Path) -> list[str]:
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    return [r["arm_latency"] for r in rows]


def test_results_record_the_arm_latency_keyed_and_resumable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    keys: set[str] = set()
    for latency, shown in SETTINGS:
        out = tmp_path / f"s{len(keys)}"
        first = _sweep(capsys, out, latency)
        assert first["ran"] == 1
        (run,) = first["runs"]
        keys.add(run["key"])
        assert _column(out) == [shown]
        again = _sweep(capsys, out, latency)  # the same grid: resumed, nothing runs again
        assert (again["ran"], again["skipped"]) == (0, 1)
        assert _column(out) == [shown]
        try:
            import pyarrow.parquet as pq
        except ImportError:
            continue
        assert pq.read_table(out / "results.parquet").column("arm_latency").to_pylist() == [shown or None]
    assert len(keys) == len(SETTINGS)  # each setting its own run


def test_another_setting_in_one_directory_is_another_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "both"
    first = _sweep(capsys, out, "measured")
    second = _sweep(capsys, out, "30")
    assert second["ran"] == 1  # not the stored run of the other setting
    assert _column(out) == ["30"]  # the table is this grid's
    (a,), (b,) = first["runs"], second["runs"]
    assert (out / "runs" / a["key"]).is_dir() and (out / "runs" / b["key"]).is_dir() and a["key"] != b["key"]
