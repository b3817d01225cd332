"""`DataSource`: what a run's market data was, precisely enough to load it again and prove
it is the same data (recorded in capture headers, verified by replay).

A file source records the file's absolute path and the SHA-256 of its bytes, and every
loading option that changes the ticks (preset, crossed/spike policies, spike factor, symbol,
tick size, multiplier, currency); the sample records its generator seed. `open_source`
loads a source again, from the recorded path or from a moved copy, and refuses data whose
checksum differs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import msgspec

from kestrel.data.errors import DataError
from kestrel.data.load import LoadReport, load
from kestrel.data.news import NewsSource
from kestrel.data.sample import SAMPLE_SEED, SAMPLE_SPEC, load_sample
from kestrel.data.spec import DEFAULT_SPIKE_FACTOR, CrossedPolicy, SpikePolicy
from kestrel.data.synthetic import generate
from kestrel.market.data import MarketData

SourceKind = Literal["sample", "file"]


class DataSource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The data of a run. `kind` "sample": the generated sample from `seed`; "file": the file
    at `path` (absolute) whose bytes hash to `sha256` (hex), loaded with the other fields."""

    kind: SourceKind
    symbol: str
    tick_size: float
    multiplier: float = 1.0
    currency: str = "USD"
    path: str | None = None
    sha256: str | None = None
    seed: int | None = None
    preset: str | None = None
    crossed: CrossedPolicy = "error"
    spikes: SpikePolicy = "error"
    spike_factor: float = DEFAULT_SPIKE_FACTOR
    delimiter: str = ","  # a CSV's field separator (`--delimiter`)
    columns: str | None = None  # the role=column mapping (`--columns`), as given
    news: NewsSource | None = None  # the run's news file (`--news`), checked by replay like the data

    def describe(self) -> str:
        """One short human line: `sample (seed 20240415)` or `/path/file.csv (sha256 1a2b3c4d…)`."""
        if self.kind == "sample":
            return f"sample (seed {self.seed})"
        return f"{self.path} (sha256 {(self.sha256 or '')[:12]}…)"


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def sample_source(data: MarketData, seed: int | None) -> DataSource:
    inst = data.instrument
    return DataSource(kind="sample", symbol=data.symbol, tick_size=data.tick_size, multiplier=inst.multiplier,
                      currency=inst.currency, seed=SAMPLE_SEED if seed is None else seed)


def file_source(report: LoadReport, data: MarketData, sha256: str, delimiter: str = ",",
                columns: str | None = None) -> DataSource:
    inst = data.instrument
    return DataSource(
        kind="file", symbol=data.symbol, tick_size=data.tick_size, multiplier=inst.multiplier,
        currency=inst.currency, path=str(Path(report.path).resolve()), sha256=sha256, preset=report.preset,
        crossed=report.crossed_policy,  # type: ignore[arg-type]
        spikes=report.spikes_policy,  # type: ignore[arg-type]
        spike_factor=report.spike_factor, delimiter=delimiter, columns=columns,
    )


def source_of(data: MarketData) -> DataSource | None:
    """The `DataSource` of data a loader read (`kestrel.data.origin`): a file's path, checksum
    and loading options, or the sample's seed; None when no loader recorded it or the file
    changed since it was loaded."""
    from kestrel.data.origin import FileOrigin, origin_of

    origin = origin_of(data)
    if origin is None:
        return None
    if not isinstance(origin, FileOrigin):
        return sample_source(data, origin.seed)
    try:
        st = Path(origin.path).stat()
    except OSError:
        return None
    if (st.st_size, st.st_mtime_ns) != (origin.size, origin.mtime_ns):
        return None
    return file_source(origin.report, data, file_sha256(origin.path), origin.delimiter, origin.columns)


def open_source(source: DataSource, path: str | Path | None = None) -> MarketData:
    """Load `source` again: the sample from its seed, a file from `path` (a moved copy) or its
    recorded path. Raises `DataError` when the file is missing or its bytes differ from the
    recorded checksum, and when the loaded data disagrees with the recorded instrument."""
    if source.kind == "sample":
        if path is not None:
            raise DataError(str(path), "the capture was made on the generated sample, not on a file; drop --data")
        seed = SAMPLE_SEED if source.seed is None else source.seed
        data = load_sample() if seed == SAMPLE_SEED else generate(SAMPLE_SPEC, seed)
    else:
        if path is not None and not str(path).strip():
            raise DataError("--data", "is empty: give the path of the moved copy of the captured data file")
        where = Path(path) if path is not None else Path(source.path or "")
        if where.is_dir():
            raise DataError(where, "is a directory, not the captured data file: give the file's path")
        if not where.is_file():
            hint = "" if path is not None else "; pass --data PATH to point at a copy of it"
            raise DataError(where, f"the captured data file is not there{hint}")
        if not source.sha256:
            raise DataError(where, "the capture records no checksum for its data file, so the data cannot be "
                                   "verified; re-capture it with kestrel simulate ... --capture")
        digest = file_sha256(where)
        if digest != source.sha256:
            raise DataError(
                where,
                f"its checksum changed since the capture (sha256 {digest[:16]}…, recorded "
                f"{source.sha256[:16]}…): this is not the data the capture was made on",
            )
        data = load(where, source.preset, crossed=source.crossed, spikes=source.spikes,
                    spike_factor=source.spike_factor, symbol=source.symbol, tick_size=source.tick_size,
                    multiplier=source.multiplier, currency=source.currency,
                    delimiter=None if source.delimiter == "," else source.delimiter, columns=source.columns).data
    inst = data.instrument
    got = (data.symbol, data.tick_size, inst.multiplier, inst.currency)
    want = (source.symbol, source.tick_size, source.multiplier, source.currency)
    if got != want:
        raise DataError(str(path or source.path or "sample"),
                        f"the data is {got} (symbol, tick size, multiplier, currency); the capture recorded {want}")
    return data


__all__ = ["DataSource", "file_sha256", "file_source", "open_source", "sample_source", "source_of"]
