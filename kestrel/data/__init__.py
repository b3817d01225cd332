"""Market-data loaders (CSV, Parquet), presets, the synthetic generator and the sample."""

from kestrel.data.errors import DataError
from kestrel.data.load import LoadReport, Loaded, build_sessions, detect_preset, load, load_market_data
from kestrel.data.sample import SAMPLE_SEED, load_sample
from kestrel.data.spec import PRESETS, LoadSpec, preset
from kestrel.data.synthetic import SyntheticSpec, generate

__all__ = [
    "PRESETS",
    "SAMPLE_SEED",
    "DataError",
    "LoadReport",
    "LoadSpec",
    "Loaded",
    "SyntheticSpec",
    "build_sessions",
    "detect_preset",
    "generate",
    "load",
    "load_market_data",
    "load_sample",
    "preset",
]
