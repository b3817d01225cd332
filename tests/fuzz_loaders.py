"""Fuzz the market-data loaders: `python tests/fuzz_loaders.py SEED FILES DIR`.

Writes FILES generated files (CSV of every timestamp form the presets read, and Parquet)
into DIR, each with random damage: bad timestamps at random rows, random quoting, offsets,
junk bytes, truncated lines and files, wrong field counts, blank lines, non-finite and
negative numbers, far-away years, spikes, duplicated columns, sizes from 1 to 5,000 rows.
Each file goes through `kestrel.data.load`; a clean load and a `DataError` are the only
accepted outcomes. Anything else prints `UNEXPECTED <file> <exception>` and exits 1. Run
with `python -W error` so that a warning counts as a failure too; run in a subprocess so a
crash (a signal) fails the caller instead of killing it. Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import random
import sys
import traceback
from pathlib import Path

JUNK_TS = [
    "not-a-time", "", " ", "2014-13-01T00:00:00Z", "2014-02-30T00:00:00Z", "2014-05-06T25:00:00Z",
    "2014-05-06T00:61:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2014-05-06T00:00:00+99:00",
    "2014-05-06T00:00:00.1234567891Z", "2014-05-06T", "2014-05-06T00:00:00.Z", "2014-05", "NaT", "nan",
    "20140506", "2014/05/06 00:00:00", "\u00e9t\u00e9", "2014-05-06T00:00:00ZZ", "2014-05-06 00:00:00 UTC UTC",
    "-1", "1e400", "99999999999999999999999", "2014-05-06T00:00:00+0", "\x7f\x01", "\ufeff2014-05-06",
]
JUNK_NUM = ["nan", "inf", "-inf", "", "1e400", "-1.0", "0", "abc", "1,5", "0x10", "1.38.1", "\u00a0", "1e-400"]
OFFSETS = ["Z", "+00:00", "+0000", "+00", " UTC", "UTC", "-05:30", "+02:00", "-0800", ""]


def iso_rows(rng: random.Random, n: int) -> list[str]:
    suffix = rng.choice(OFFSETS)
    frac = rng.choice(["", ".158", ".295000", ".123456789"])
    sep = rng.choice(["T", " "])
    out = []
    t = rng.randrange(0, 20 * 3600)
    for _ in range(n):
        t += rng.choice([0, 1, 1, 2, 60])
        d, s = divmod(t, 86400)
        out.append(f"2014-05-{6 + d:02d}{sep}{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}{frac}{suffix}")
    return out


def make_csv(rng: random.Random, n: int) -> tuple[str, bytes]:
    """A CSV in one of the presets' layouts, then damaged."""
    layout = rng.choice(["oanda", "truefx", "binance_trades", "histdata", "cme_bars", "freqtrade_trades"])
    price = 1.38 if layout != "binance_trades" else 60000.0
    header: list[str] | None
    if layout in ("oanda", "truefx"):
        header = ["ts_utc" if layout == "oanda" else "timestamp", "bid", "ask"]
        ts = iso_rows(rng, n)
        rows = [[t, f"{price:.5f}", f"{price + 0.0001:.5f}"] for t in ts]
    elif layout == "binance_trades":
        header = ["local_ts_ns", "price", "qty"]
        t0 = 1_723_161_240_000_000_000
        rows = [[str(t0 + k * 1_000_000), f"{price + rng.randrange(10):.1f}", "0.01"] for k in range(n)]
    elif layout == "freqtrade_trades":
        header = ["timestamp_ms", "price", "amount"]
        rows = [[str(1_570_752_000_000 + k * 500), "0.000987", "12.5"] for k in range(n)]
    elif layout == "histdata":
        header = None
        rows = [[f"20200101 17{k // 600 % 60:02d}{k // 10 % 60:02d}{k % 10:03d}", "1.12", "1.1201", "0"] for k in range(n)]
    else:
        header = ["timestamp_utc", "open", "high", "low", "close", "volume"]
        ts = [f"2024-01-0{2 + k // 1440}T{k // 60 % 24:02d}:{k % 60:02d}:00Z" for k in range(n)]
        rows = [[t, "1.1000", "1.1005", "1.0995", "1.1000", "10"] for t in ts]
    width = len(rows[0])
    for _ in range(rng.choice([0, 1, 1, 2, 5])):
        damage(rng, rows, width)
    if header is not None and rng.random() < 0.05:
        header = header + [header[-1]]  # a duplicated column
    quote = rng.random() < 0.2
    lines = [",".join(header)] if header is not None else []
    for r in rows:
        if quote:
            r = [f'"{f}"' if rng.random() < 0.7 else f for f in r]
        lines.append(",".join(r))
    text = ("\r\n" if rng.random() < 0.1 else "\n").join(lines) + ("\n" if rng.random() < 0.9 else "")
    data = (b"\xef\xbb\xbf" if rng.random() < 0.05 else b"") + text.encode("utf-8")
    if rng.random() < 0.1:  # junk bytes somewhere
        k = rng.randrange(len(data) + 1)
        data = data[:k] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))) + data[k:]
    if rng.random() < 0.1:  # a truncated file
        data = data[: rng.randrange(len(data) + 1)]
    return layout, data


def damage(rng: random.Random, rows: list[list[str]], width: int) -> None:
    i = rng.randrange(len(rows))
    kind = rng.randrange(9)
    if len(rows[i]) != width and kind in (0, 1, 5, 7, 8):
        kind = 3  # a row already cut short: damage it another way
    if kind == 0:
        rows[i][0] = rng.choice(JUNK_TS)
    elif kind == 1:
        rows[i][rng.randrange(1, width)] = rng.choice(JUNK_NUM)
    elif kind == 2:  # a truncated line
        line = ",".join(rows[i])
        rows[i] = line[: rng.randrange(len(line) + 1)].split(",")
    elif kind == 3:
        rows[i] = rows[i] + ["extra"]
    elif kind == 4:
        rows[i] = [""]
    elif kind == 5:  # a fat-finger spike
        j = rng.randrange(1, width)
        try:
            rows[i][j] = repr(float(rows[i][j]) * rng.choice([1e6, 1e-6, 3.0]))
        except ValueError:
            pass
    elif kind == 6:  # rows out of order
        k = rng.randrange(len(rows))
        rows[i], rows[k] = rows[k], rows[i]
    elif kind == 7:
        rows[i][rng.randrange(width)] = "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 6)))
    else:
        rows[i][0] = rows[i][0].replace("2014", rng.choice(["9999", "1500", "0000", "2262", "1677"]))


def make_parquet(rng: random.Random, n: int, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ts: list[str | None] = list(iso_rows(rng, n))
    bid: list[float | None] = [1.38] * n
    for _ in range(rng.choice([0, 1, 2])):
        i = rng.randrange(n)
        which = rng.randrange(3)
        if which == 0:
            ts[i] = rng.choice([*JUNK_TS, None])
        elif which == 1:
            bid[i] = rng.choice([None, float("nan"), float("inf"), -1.0, 1.38e6])
    table = pa.table({"ts_event": pa.array(ts, pa.string()), "bid": pa.array(bid, pa.float64()),
                      "ask": pa.array([1.3801] * n, pa.float64())})
    pq.write_table(table, path)
    if rng.random() < 0.2:  # a damaged file
        raw = path.read_bytes()
        k = rng.randrange(len(raw))
        path.write_bytes(raw[:k] if rng.random() < 0.5 else raw[:k] + b"\x00\xff" + raw[k + 2:])


def main() -> int:
    seed, count, folder = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    from kestrel.data import DataError, load

    rng = random.Random(seed)
    tally = {"files": 0, "rows": 0, "loaded": 0, "refused": 0, "parquet": 0}
    for k in range(count):
        n = max(1, int(round(5000 ** rng.random())))  # log-uniform 1..5000 rows
        if rng.random() < 0.1:
            path = folder / f"f{k}.parquet"
            make_parquet(rng, n, path)
            preset = "oanda"
            tally["parquet"] += 1
        else:
            preset, data = make_csv(rng, n)
            path = folder / f"f{k}.csv"
            path.write_bytes(data)
            if rng.random() < 0.3:
                preset = None  # let the loader detect it
        tally["files"] += 1
        tally["rows"] += n
        policy = rng.choice(["error", "drop", "keep"])
        try:
            load(path, preset, crossed=policy, spikes=policy)  # type: ignore[arg-type]
            tally["loaded"] += 1
        except DataError as e:
            tally["refused"] += 1
            if not str(e).isprintable():
                print(f"UNEXPECTED {path} unprintable or multi-line DataError: {e!r}")
                return 1
        except BaseException as e:  # anything else is a defect
            print(f"UNEXPECTED {path} {type(e).__name__}: {e}")
            traceback.print_exc()
            return 1
        path.unlink()
    print(json.dumps(tally))
    return 0


if __name__ == "__main__":
    sys.exit(main())
