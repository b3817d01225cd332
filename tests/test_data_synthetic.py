"""The seeded generator and the bundled sample: determinism and the model's stylized facts."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np

from kestrel.data import SAMPLE_SEED, SyntheticSpec, generate, load_sample
from kestrel.market.ticks import NS_PER_S


def _digest(seed: int, spec: SyntheticSpec = SyntheticSpec(sessions=2)) -> str:
    t = generate(spec, seed).ticks
    h = hashlib.sha256()
    for a in (t.ts, t.bid, t.ask, t.last, t.size):
        h.update(a.tobytes())
    return h.hexdigest()


def test_same_seed_identical_arrays_different_seed_differs() -> None:
    assert _digest(1) == _digest(1)
    assert _digest(1) != _digest(2)


def test_sample_shape() -> None:
    d = load_sample()
    assert d.symbol == "SAMPLE" and d.tick_size == 0.01
    assert [s.date for s in d.sessions] == [dt.date(2024, 4, 8), dt.date(2024, 4, 9), dt.date(2024, 4, 10),
                                            dt.date(2024, 4, 11), dt.date(2024, 4, 12), dt.date(2024, 4, 15)]
    assert all((s.open, s.close, s.tz) == (dt.time(9, 30), dt.time(16, 0), "America/New_York") for s in d.sessions)
    t = d.ticks
    assert len(t) == 6 * 23_400
    assert t.validated() is t
    assert np.all(np.diff(t.ts) > 0)
    gaps = np.diff(t.ts[:23_400]) / NS_PER_S
    assert 0.0 < gaps.min() and gaps.max() < 2.0 and abs(gaps.mean() - 1.0) < 0.01
    for i, s in enumerate(d.sessions):
        day = t.between(s.open_ns, s.close_ns)
        assert len(day) == 23_400
    assert load_sample() is d  # cached
    assert not t.bid.flags.writeable


def test_prices_on_the_tick_grid_and_last_at_touch() -> None:
    t = load_sample().ticks
    for a in (t.bid, t.ask, t.last):
        k = a * 100
        assert np.all(np.abs(k - np.round(k)) < 1e-6)
    assert np.all((t.last == t.bid) | (t.last == t.ask))
    assert np.all(t.ask - t.bid >= 0.01 - 1e-9)
    assert np.all(t.size >= 10) and np.all(t.size % 10 == 0)


def test_spread_wider_at_open_and_volume_u_shaped() -> None:
    d = load_sample()
    t = d.ticks
    n = 23_400
    spread = (t.ask - t.bid).reshape(6, n)
    size = t.size.reshape(6, n)
    first5, mid = spread[:, :300].mean(), spread[:, 9000:14000].mean()
    assert first5 > 2 * mid
    open_vol, lunch_vol, close_vol = size[:, :1800].mean(), size[:, 10000:13000].mean(), size[:, -1800:].mean()
    assert open_vol > 1.5 * lunch_vol and close_vol > 1.2 * lunch_vol


def test_volatility_clusters() -> None:
    t = load_sample().ticks
    r = np.diff(np.log((t.bid + t.ask) / 2))
    a = np.abs(r - r.mean())
    lag = 60
    corr = np.corrcoef(a[:-lag], a[lag:])[0, 1]
    assert corr > 0.05  # absolute returns stay autocorrelated a minute later


def test_another_seed_gives_another_day_of_the_same_shape() -> None:
    """(Speed is measured by bench/data_load.py, not asserted here.) The same spec and seed give
    identical arrays; another seed gives different prices on the same session grid."""
    spec = SyntheticSpec()
    a, b = generate(spec, SAMPLE_SEED + 1), generate(spec, SAMPLE_SEED + 1)
    base = load_sample()
    for name in ("ts", "bid", "ask", "last", "size"):
        assert np.array_equal(getattr(a.ticks, name), getattr(b.ticks, name))
    assert a.sessions == base.sessions and len(a.ticks) == len(base.ticks)
    assert not np.array_equal(a.ticks.bid, base.ticks.bid)
    assert np.all(a.ticks.bid <= a.ticks.ask) and np.all(np.diff(a.ticks.ts) > 0)


def test_bad_spec_fails_with_the_field_named() -> None:
    import pytest

    for field, value, rule in [("sessions", 0, ">= 1"), ("tick_interval_s", 0.0, "> 0"),
                               ("tick_size", -0.01, "> 0"), ("daily_vol", -1.0, ">= 0"),
                               ("jump_sigma", float("nan"), ">= 0")]:
        with pytest.raises(ValueError, match=f"^{field} must be {rule}, got "):
            generate(SyntheticSpec(**{field: value}), 1)  # type: ignore[arg-type]
