"""Split-sized jumps told apart by volume: on the real Lean daily data (skipped when absent) AAPL's
2000-09-29 crash reads as a market move and its real splits as splits; on generated bars a split
of every ratio the check knows (prices / r, volume x r from the ex-date on) is flagged and a
crash of the same price ratio with a one-day volume spike is not; without volume the price
alone decides and the report says so."""

from __future__ import annotations

import datetime as dt
import statistics
from fractions import Fraction
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data.corporate import RATIOS, probable_splits, split_sized_jumps
from kestrel.data.universe import load_universe

LEAN_DAILY = "equities_daily/lean_us_equities_daily_bars.parquet"
FACTORS = "equities_daily/lean_us_equities_factor_files.csv"
CRASH = dt.date(2000, 9, 29)  # AAPL 53.38 -> 28.06 on an earnings warning, near 2:1
REAL_SPLITS = {(dt.date(2000, 6, 21), 2, 1), (dt.date(2005, 2, 28), 2, 1), (dt.date(2014, 6, 9), 7, 1),
               (dt.date(2020, 8, 31), 4, 1)}  # AAPL's splits in the factor file, all inside the raw data


def _aapl_volumes(shared_data: Path) -> tuple[list[dt.date], list[float]]:
    t = pq.read_table(shared_data / LEAN_DAILY)
    t = t.filter(pc.equal(t["symbol"], "AAPL")).sort_by("date")
    return t["date"].to_pylist(), [float(v) for v in t["volume"].to_pylist()]


def test_the_aapl_crash_of_2000_reads_as_a_gap_and_its_real_splits_as_splits(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, symbols=["AAPL"], spikes="keep")
    flagged = {(p.date, p.numerator, p.denominator) for p in r.report.probable_splits}
    assert flagged == REAL_SPLITS
    (gap,) = r.report.split_sized_gaps
    assert (gap.date, gap.numerator, gap.denominator, gap.previous_close, gap.open, gap.verdict) == (
        CRASH, 2, 1, 53.38, 28.06, "gap")
    dates, volumes = _aapl_volumes(shared_data)  # by hand from the file: the day over the 20 sessions after
    k = dates.index(CRASH)
    assert gap.volume_spike == pytest.approx(volumes[k] / statistics.median(volumes[k + 1:k + 21]))
    assert gap.volume_ratio == pytest.approx(statistics.median(volumes[k + 1:k + 21])
                                             / statistics.median(volumes[k - 20:k]))
    assert gap.volume_spike is not None and gap.volume_spike > 9  # 134.1M shares against about 14M a day after it
    line = next(x for x in r.report.notes() if "2000-09-29" in x)
    assert line == ("AAPL: a 2:1-sized gap on 2000-09-29 (53.38 -> 28.06) reads as a market move, not a split: volume "
                    "day/after x9.55, a one-day spike (a split's is near x1); if it was a split, give a factor "
                    "file (--factors) to adjust it")
    assert not any("probable unadjusted split 2:1 on 2000-09-29" in x for x in r.report.notes())


def test_with_the_factor_file_no_aapl_jump_reads_as_a_split(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, factors=shared_data / FACTORS, symbols=["AAPL"], spikes="keep")
    assert r.report.probable_splits == ()  # the rows explain every split; the crash is a gap
    assert [(p.date, p.verdict, p.adjusted) for p in r.report.split_sized_gaps] == [(CRASH, "gap", True)]
    (line,) = [x for x in r.report.notes() if "-sized gap" in x]
    # the prices are the adjusted series', labelled as such; the fix names the factor file
    assert line.startswith(f"AAPL: a 2:1-sized gap on {CRASH} (adjusted ") and line.endswith(
        "if it was a split, add it to the factor file")
    # kept spikes are named, not only their symptoms
    assert "AAPL: 3 one-row price spikes (far from both neighbours): kept as is" in r.report.notes()
    dropped = load_universe(shared_data / LEAN_DAILY, symbols=["AAPL"], spikes="drop").report.notes()
    assert "AAPL: 3 one-row price spikes (far from both neighbours): dropped 3" in dropped
    assert dropped[0].startswith("1 symbol (bars) over ")


def _bars(path: Path, closes: list[float], volumes: list[float] | None) -> Path:
    days = [d for d in (dt.date(2024, 1, 2) + dt.timedelta(days=k) for k in range(3 * len(closes)))
            if d.weekday() < 5 and d not in (dt.date(2024, 1, 15), dt.date(2024, 2, 19), dt.date(2024, 3, 29))]
    head = "date,open,high,low,close" + (",volume" if volumes is not None else "")
    lines = [head] + [f"{d},{c!r},{c!r},{c!r},{c!r}" + (f",{volumes[i]!r}" if volumes is not None else "")
                      for i, (d, c) in enumerate(zip(days, closes))]
    path.write_text("\n".join(lines) + "\n")
    return path


SESSIONS = 48
JUMP = 24  # the ex-date: 24 sessions before it, 24 from it on


@settings(max_examples=60, deadline=None)
@given(r=st.sampled_from(RATIOS),
       moves=st.lists(st.floats(min_value=-0.02, max_value=0.02), min_size=SESSIONS - 1, max_size=SESSIONS - 1),
       noise=st.lists(st.floats(min_value=0.8, max_value=1.25), min_size=SESSIONS, max_size=SESSIONS),
       spike=st.floats(min_value=8.0, max_value=50.0))
def test_a_split_of_any_ratio_is_flagged_and_a_crash_of_its_size_with_a_volume_spike_is_not(
        tmp_path_factory: pytest.TempPathFactory, r: Fraction, moves: list[float], noise: list[float],
        spike: float) -> None:
    base = [100.0]
    for m in moves:
        base.append(base[-1] * (1 + m))
    prices = [p if i < JUMP else p / float(r) for i, p in enumerate(base)]
    volume = [1e6 * n for n in noise]
    folder = tmp_path_factory.mktemp("jump")
    split = load_universe(_bars(folder / "ZZ.csv", prices, [v * float(r) if i >= JUMP else v
                                                            for i, v in enumerate(volume)])).universe["ZZ"].data
    (hit,) = probable_splits(split)
    assert (hit.numerator, hit.denominator) == (r.numerator, r.denominator)
    assert hit.date == split.sessions[JUMP].date and hit.verdict == "split"
    crash = load_universe(_bars(folder / "ZZ.csv", prices, [v * spike if i == JUMP else v
                                                            for i, v in enumerate(volume)])).universe["ZZ"].data
    assert probable_splits(crash) == []
    (gap,) = split_sized_jumps(crash)
    assert (gap.numerator, gap.denominator, gap.verdict) == (r.numerator, r.denominator, "gap")


def test_without_volume_the_price_decides_and_the_line_says_so(tmp_path: Path) -> None:
    closes = [100.0] * JUMP + [50.0] * (SESSIONS - JUMP)
    r = load_universe(_bars(tmp_path / "ZZ.csv", closes, None))
    (hit,) = r.report.probable_splits
    assert (hit.numerator, hit.denominator, hit.volume_ratio, hit.volume_spike) == (2, 1, None, None)
    assert any(x.startswith("ZZ: probable unadjusted split 2:1 on ") and
               x.endswith("(100 -> 50; price only: no volume to tell it from a large gap); give a factor file "
                          "(--factors) to adjust it") for x in r.report.notes())


@pytest.mark.parametrize(("up", "volume_after", "verdict"), [
    (True, 2.5, "gap"), (True, 1.75, "split"), (True, 0.5, "split"),
    (False, 0.4, "gap"), (False, 0.625, "split"), (False, 2.0, "split")])
def test_volume_that_moves_against_the_split_reads_as_a_gap(tmp_path: Path, up: bool, volume_after: float,
                                                            verdict: str) -> None:
    # a jump up of 1:2's size with volume up more than turnover drifts (x2) is a rally; with volume
    # halved, or up less than that, a reverse split; a drop of 2:1's size the other way round; no
    # one-day spike either way
    after = 200.0 if up else 50.0
    closes = [100.0 + 0.1 * (i % 3) for i in range(JUMP)] + [after] * (SESSIONS - JUMP)
    volumes = [1e6] * JUMP + [1e6 * volume_after] * (SESSIONS - JUMP)
    (jump,) = split_sized_jumps(load_universe(_bars(tmp_path / "ZZ.csv", closes, volumes)).universe["ZZ"].data)
    assert (jump.numerator, jump.denominator) == ((1, 2) if up else (2, 1))
    assert (jump.verdict, jump.volume_ratio, jump.volume_spike) == (verdict, volume_after, 1.0)
