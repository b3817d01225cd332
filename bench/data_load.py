"""Benchmark the data side: generating the sample and loading CSV/Parquet quote files.

Prints one JSON line. Ratios compare against references measured in the same run:
- `sample_generate_ms`: `generate(SyntheticSpec(), seed)` (the sample's 6 sessions, 140 k
  ticks); the issue's target is under 500 ms (the timing test this replaces asserted < 1 s);
- `csv_load_over_pyarrow_read`: `kestrel.data.load` of an ISO-timestamp quote CSV (parse,
  validate every timestamp and price, spikes, crossed quotes, tick inference, sessions)
  divided by `pyarrow.csv.read_csv` of the same file (tokenising and typing only, with
  pyarrow's own ISO-8601 timestamp parser, multi-threaded): what the checks cost over a
  bare read;
- `iso_parse_over_datetime64_ms`: the byte-matrix ISO parser alone divided by numpy's
  `astype("datetime64[ns]")` on the same text as a unicode array (the safe form of the cast
  that crashed on bytes arrays).
Usage: python bench/data_load.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kestrel.data import SyntheticSpec, generate, load  # noqa: E402
from kestrel.data.timestamps import parse_iso  # noqa: E402


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 7
    import pyarrow as pa
    import pyarrow.csv as pcsv

    sample_ms = median_ms(lambda: generate(SyntheticSpec(), 20240416), reps)
    md = generate(SyntheticSpec(sessions=2 if args.quick else 6), 5)
    t = md.ticks
    stamps = np.datetime_as_string(t.ts.astype("datetime64[ns]"), unit="ms")
    iso = np.char.add(stamps, "Z")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quotes.csv"
        lines = [f"{s},{b:.2f},{a:.2f}" for s, b, a in zip(iso.tolist(), t.bid.tolist(), t.ask.tolist())]
        path.write_text("ts_utc,bid,ask\n" + "\n".join(lines) + "\n")
        load_ms = median_ms(lambda: load(path, "oanda"), reps)
        opts = pcsv.ConvertOptions(column_types={"ts_utc": pa.timestamp("ns", tz="UTC")})
        arrow_ms = median_ms(lambda: pcsv.read_csv(path, convert_options=opts), reps)
    text = stamps.astype(str)
    parse_ms = median_ms(lambda: parse_iso(iso, "UTC"), reps)
    numpy_ms = median_ms(lambda: text.astype("datetime64[ns]"), reps)
    print(json.dumps({
        "rows": len(t),
        "sample_generate_ms": round(sample_ms, 1),
        "csv_load_ms": round(load_ms, 1),
        "pyarrow_read_csv_ms": round(arrow_ms, 1),
        "csv_load_over_pyarrow_read": round(load_ms / arrow_ms, 2),
        "iso_parse_ms": round(parse_ms, 1),
        "numpy_datetime64_ms": round(numpy_ms, 1),
        "iso_parse_over_datetime64": round(parse_ms / numpy_ms, 2),
    }))


if __name__ == "__main__":
    main()
