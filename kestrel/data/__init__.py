"""Market-data loaders (CSV, Parquet), presets, column roles, universes, corporate actions, the
synthetic generator and the sample."""

from kestrel.data.columns import ColumnError, ColumnMap, parse_columns
from kestrel.data.errors import DataError
from kestrel.data.load import LoadReport, Loaded, build_sessions, detect_preset, load, load_market_data
from kestrel.data.sample import SAMPLE_SEED, load_sample
from kestrel.data.spec import PRESETS, LoadSpec, preset
from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.data.universe import LoadedUniverse, UniverseReport, load_universe

__all__ = [
    "PRESETS",
    "SAMPLE_SEED",
    "ColumnError",
    "ColumnMap",
    "DataError",
    "LoadReport",
    "LoadSpec",
    "Loaded",
    "LoadedUniverse",
    "SyntheticSpec",
    "UniverseReport",
    "build_sessions",
    "detect_preset",
    "generate",
    "load",
    "load_market_data",
    "load_sample",
    "load_universe",
    "parse_columns",
    "preset",
]
