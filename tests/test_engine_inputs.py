"""The engine reads one tick layout (int64 ts, float64 columns, native byte order,
contiguous) whatever it is given: other numeric layouts are converted exactly at the door
(`Ticks.canonical`), so both paths, compiled or not, write the ledger the float64 ticks
give; a non-numeric column, a non-numeric tick size or a hand-built carry of the wrong types
fails closed with the field named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kestrel.engine import Carry, CarriedOrder, Engine, EngineConfig
from kestrel.market.ticks import Ticks

from bench.engine_throughput import make_days, plan_of
from bench.workloads import ALL_DAY, RICH


def _ledger(session: object, ticks: Ticks, text: str, path: str, tick_size: object = 0.01) -> bytes:
    e = Engine(EngineConfig(maxorders=5000), session, "SYN", tick_size)  # type: ignore[arg-type]
    e.arm(plan_of(text))
    return e.run(ticks, path=path).to_jsonl()


def _raw(*cols: Any) -> Ticks:
    """Ticks of the columns as given (the layouts a caller may hand the engine)."""
    return Ticks(*cols)


def _layouts(t: Ticks) -> dict[str, Ticks]:
    f32 = t.bid.astype(np.float32)
    return {
        # float32 prices (on the grid of a float32: the float64 of each value is the same price)
        "float32": _raw(t.ts, f32, (f32 + np.float32(0.01)), f32, t.size.astype(np.float32)),
        "big_endian": _raw(t.ts.astype(">i8"), t.bid.astype(">f8"), t.ask.astype(">f8"),
                            t.last.astype(">f8"), t.size.astype(">f8")),
        "strided": _raw(*(np.repeat(c, 2)[::2] for c in (t.ts, t.bid, t.ask, t.last, t.size))),
        "int_prices": _raw(t.ts.astype(np.uint64), np.rint(t.bid * 100).astype(np.int64),
                            np.rint(t.ask * 100).astype(np.int64), np.rint(t.last * 100).astype(np.int64),
                            t.size.astype(np.int64)),
    }


@pytest.mark.parametrize("layout", ["float32", "big_endian", "strided", "int_prices"])
@pytest.mark.parametrize("text", [RICH, ALL_DAY], ids=["rich", "all_day"])
def test_other_layouts_give_the_float64_ledger_on_both_paths(layout: str, text: str) -> None:
    (session, day), = make_days(20_000, seed=9, sessions=1)
    odd = _layouts(day)[layout]
    canon = odd.canonical()
    assert canon.ts.dtype == np.int64 and canon.bid.dtype == np.float64
    assert all(c.flags.c_contiguous and c.dtype.isnative
               for c in (canon.ts, canon.bid, canon.ask, canon.last, canon.size))
    want = _ledger(session, canon, text, "reference")
    assert want.count(b"\n") > (3 if layout == "int_prices" else 100)  # (whole-cent prices: a few rejects)
    assert _ledger(session, odd, text, "reference") == want
    assert _ledger(session, odd, text, "fast") == want


def test_canonical_ticks_are_returned_as_they_are() -> None:
    (_, day), = make_days(1000, seed=9, sessions=1)
    assert day.canonical() is day


@pytest.mark.parametrize("column, bad, message", [
    ("ts", np.zeros(5, dtype=np.float64), "column 'ts' has dtype float64, expected int64"),
    ("bid", np.array(["1"] * 5), "column 'bid' has dtype <U1, expected float64"),
    ("size", np.zeros(5, dtype=object), "column 'size' has dtype object, expected float64"),
])
def test_a_non_numeric_column_fails_closed(column: str, bad: np.ndarray, message: str) -> None:
    (session, day), = make_days(5, seed=9, sessions=1)
    cols = {k: getattr(day, k) for k in ("ts", "bid", "ask", "last", "size")}
    cols[column] = bad
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        _ledger(session, _raw(*cols.values()), ALL_DAY, "reference")


def test_tick_size_is_read_as_its_decimal_value() -> None:
    (session, day), = make_days(20_000, seed=9, sessions=1)
    want = _ledger(session, day, RICH, "reference")
    for size in (np.float32(0.01), np.float64(0.01), "0.01x"):
        if isinstance(size, str):
            with pytest.raises(ValueError, match="tick_size must be a number, got str"):
                _ledger(session, day, RICH, "reference", size)
            continue
        for path in ("reference", "fast"):
            assert _ledger(session, day, RICH, path, size) == want, (size, path)
    with pytest.raises(ValueError, match="tick_size must be a number, got bool"):
        _ledger(session, day, RICH, "reference", True)
    with pytest.raises(ValueError, match="finite number > 0"):
        _ledger(session, day, RICH, "reference", -0.01)


def test_a_hand_built_carry_of_the_wrong_types_fails_closed() -> None:
    (session, _), = make_days(10, seed=9, sessions=1)
    good = Carry(100, "100.25", (CarriedOrder("stop", -1, 100, "stp", 99.5, None),))
    Engine(EngineConfig(), session, "SYN", 0.01, good)  # accepted
    for bad, field in ((Carry(np.int64(100), "100.25"), "Carry: pos="),  # type: ignore[arg-type]
                       (Carry(100, "100.25", (CarriedOrder("stop", -1, np.int64(100), "stp", 99.5, None),)),  # type: ignore[arg-type]
                        "CarriedOrder: qty=")):
        with pytest.raises(ValueError, match=field + r"np.int64\(100\) is invalid"):
            Engine(EngineConfig(), session, "SYN", 0.01, bad)
