"""The bundled default sample: `load_sample()` / `--data sample`.

Generated on the fly (no file shipped) from a fixed seed: symbol SAMPLE, a US-equity-like
instrument (tick 0.01), the regular session 09:30–16:00 New York, about one tick per second,
5 history sessions (2024-04-08 … 04-12) plus the session under test (2024-04-15). The arrays
are read-only and cached, so repeated calls are free.
"""

from __future__ import annotations

from functools import lru_cache

from kestrel.data.origin import SampleOrigin, remember
from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.market.data import MarketData

SAMPLE_SEED = 20240415
SAMPLE_SPEC = SyntheticSpec()
MAX_SEED = 2**63 - 1  # what a capture header (msgspec int) can hold


def sample_seed(value: int | str, flag: str = "--seed") -> int:
    """`value` as a sample seed (a whole number 0 to MAX_SEED), or ValueError naming `flag`."""
    text = str(value).strip()
    if not text.isdecimal():  # a sign, a fraction, letters
        shown = value if isinstance(value, int) else repr(value)
        raise ValueError(f"{flag} must be a whole number >= 0, got {shown}")
    seed = int(text)
    if seed > MAX_SEED:
        raise ValueError(f"{flag} must be at most 2**63-1 ({MAX_SEED}), got {seed}")
    return seed


@lru_cache(maxsize=1)
def load_sample() -> MarketData:
    """The default sample day with its 5 history sessions (deterministic)."""
    data = generate(SAMPLE_SPEC, SAMPLE_SEED)
    remember(data, SampleOrigin(SAMPLE_SEED))
    return data
