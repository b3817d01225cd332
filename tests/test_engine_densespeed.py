"""The dense loop's speedups change no value: the ema without the reseed test equals the
reference recurrence bit for bit (NaN, inf, -0.0, overflow included)."""

from __future__ import annotations

import numpy as np

from kestrel.engine.vector import Columns


def test_ema_equals_the_reference_recurrence() -> None:
    rng = np.random.default_rng(1)
    cols = Columns.__new__(Columns)
    for trial in range(400):
        n = int(rng.integers(1, 300))
        x = np.round(rng.standard_normal(n) * rng.choice([1.0, 1e3, 1e300]), int(rng.integers(0, 4)))
        if trial % 7 == 0:
            x[rng.integers(0, n)] = 0.0
        if trial % 11 == 0:
            x[0] = -0.0
        if trial % 13 == 0:
            x[rng.integers(0, n)] = np.inf
        if trial % 17 == 0:
            x[rng.integers(0, n)] = np.nan
        k = int(rng.integers(1, 50))
        got = cols._ema(x, k)
        want = np.asarray(Columns._ema_list(x.tolist(), k), dtype=np.float64)
        assert got.tobytes() == want.tobytes(), trial
    assert cols._ema(np.zeros(0), 5).shape == (0,)
    big = np.array([1.7e308, -1.7e308, 1.7e308, 3.0])
    assert cols._ema(big, 1).tobytes() == np.asarray(Columns._ema_list(big.tolist(), 1)).tobytes()
