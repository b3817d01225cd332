"""The sweep's results table records each run's blind mode (`blind`) and news file (`news`:
`NAME@SHA`, the file's name and the first 12 hex digits of its SHA-256; empty without one) in
results.csv and results.parquet; both are in the run's key, so a rerun of the same grid resumes
the run with the columns as they were."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli

NEWS = [
    {"published_utc": "2024-04-15T12:00:00Z", "symbol": "SAMPLE", "source": "Wire", "title": "Sample Corp beats"},
]


def _sweep(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> dict[str, Any]:
    code, text, err = run_cli(capsys, "sweep", "--agents", "baseline", "--days", "1", "--checkpoints", "11:00",
                              "--out", str(out), "--json", *extra)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(text)
    return doc


def _row(out: Path) -> dict[str, str]:
    (row,) = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    return row


def _parquet(out: Path) -> dict[str, Any] | None:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    got: dict[str, Any] = row
    return got


def test_results_record_blind_and_news_keyed_and_resumable(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    news = tmp_path / "headlines.jsonl"
    news.write_text("".join(json.dumps(r) + "\n" for r in NEWS), encoding="utf-8")
    label = "headlines.jsonl@" + hashlib.sha256(news.read_bytes()).hexdigest()[:12]
    cases = ((("--blind", "--news", str(news)), "True", label, True),
             (("--news", str(news)), "False", label, False),
             ((), "False", "", False))
    keys = set()
    for i, (flags, blind, shown, blind_bool) in enumerate(cases):
        out = tmp_path / f"s{i}"
        first = _sweep(capsys, out, *flags)
        assert first["ran"] == 1
        keys.add(first["runs"][0]["key"])
        row = _row(out)
        assert (row["blind"], row["news"]) == (blind, shown)
        again = _sweep(capsys, out, *flags)  # the same grid: resumed, nothing runs again
        assert (again["ran"], again["skipped"]) == (0, 1)
        assert (_row(out)["blind"], _row(out)["news"]) == (blind, shown)
        table = _parquet(out)
        if table is not None:
            assert (table["blind"], table["news"]) == (blind_bool, shown or None)
    assert len(keys) == len(cases)  # each setting its own run
