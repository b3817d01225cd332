"""The bundled default sample: `load_sample()` / `--data sample`.

Generated on the fly (no file shipped) from a fixed seed: symbol SAMPLE, a US-equity-like
instrument (tick 0.01), the regular session 09:30–16:00 New York, about one tick per second,
5 history sessions (2024-04-08 … 04-12) plus the session under test (2024-04-15). The arrays
are read-only and cached, so repeated calls are free.
"""

from __future__ import annotations

from functools import lru_cache

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.frame.market import MarketData

SAMPLE_SEED = 20240415
SAMPLE_SPEC = SyntheticSpec()


@lru_cache(maxsize=1)
def load_sample() -> MarketData:
    """The default sample day with its 5 history sessions (deterministic)."""
    return generate(SAMPLE_SPEC, SAMPLE_SEED)
