"""Column roles and the `--columns` mapping: property tests of the parser and the inference,
the one-line errors, and plain files that load without a preset (daily bars on the calendar)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data import DataError, load
from kestrel.data.columns import ALIASES, KIND_ROLES, ROLES, ColumnError, ColumnMap, infer_roles, normalize, parse_columns

# column names a mapping can hold: no ',' or '=', no surrounding blanks, not empty
_NAME = st.text(st.characters(blacklist_characters=",=\n\r", blacklist_categories=("Cs", "Zl", "Zp", "Cc")),
                min_size=1, max_size=12).map(str.strip).filter(bool)


@st.composite
def mappings(draw: st.DrawFn) -> ColumnMap:
    roles = draw(st.lists(st.sampled_from(ROLES), unique=True, max_size=len(ROLES)))
    cols = draw(st.lists(_NAME, unique=True, min_size=len(roles), max_size=len(roles)))
    return ColumnMap(tuple(zip(roles, cols)))


@settings(max_examples=200, deadline=None)
@given(mappings())
def test_a_mapping_round_trips_through_its_text(m: ColumnMap) -> None:
    if not m.pairs:
        with pytest.raises(ColumnError, match="is empty"):
            parse_columns(m.text())
        return
    assert parse_columns(m.text()) == m
    upper_roles = ",".join(f"{r.upper()} = {c}" for r, c in m.pairs)  # roles in any case, blanks around '='
    assert parse_columns(upper_roles) == m


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60))
def test_any_text_parses_or_fails_with_one_line(text: str) -> None:
    try:
        m = parse_columns(text)
    except ColumnError as e:
        msg = str(e)
        assert msg.startswith("--columns") and "\n" not in msg and msg.isprintable()
    else:
        assert len({r for r, _ in m.pairs}) == len(m.pairs)
        assert len({c for _, c in m.pairs}) == len(m.pairs)
        assert all(r in ROLES for r, _ in m.pairs)


def _spell(data: st.DataObject, alias: str) -> str:
    """An alias as a file might write it: any letter case, `_` as itself, a blank or a dash."""
    out = "".join(c.upper() if data.draw(st.booleans()) else c for c in alias)
    sep = data.draw(st.sampled_from(["_", " ", "-"]))
    return out.replace("_", sep)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_inference_finds_every_role_of_a_kind_in_any_order_and_case(data: st.DataObject) -> None:
    kind, need, optional = data.draw(st.sampled_from(KIND_ROLES))
    roles = ["ts", *need, *data.draw(st.lists(st.sampled_from(optional), unique=True)),
             *data.draw(st.lists(st.just("symbol"), max_size=1))]
    want = {r: _spell(data, data.draw(st.sampled_from(ALIASES[r]))) for r in roles}
    known = {a for names in ALIASES.values() for a in names}
    extras = data.draw(st.lists(st.text("xyzq", min_size=1, max_size=5).map(lambda s: "extra_" + s), unique=True,
                                max_size=4))
    assert not any(normalize(e) in known for e in extras)
    header = data.draw(st.permutations([*want.values(), *extras]))
    got = infer_roles(list(header))
    assert got.kind == kind
    assert got.columns == want


def test_a_mapped_column_takes_its_role_before_the_common_name() -> None:
    header = ["Date", "Open", "High", "Low", "Close", "Adj Close", "Volume"]
    assert infer_roles(header).columns["close"] == "Close"
    got = infer_roles(header, parse_columns("close=Adj Close"))
    assert got.columns["close"] == "Adj Close" and got.columns["ts"] == "Date" and got.kind == "bars"


@pytest.mark.parametrize(("text", "message"), [
    ("", "--columns is empty: give role=column pairs like ts=Date,close=Close"),
    ("ts", "--columns: 'ts' is not role=column (e.g. ts=Date); roles: " + ", ".join(ROLES)),
    ("when=Date", "--columns: unknown role 'when'; roles: " + ", ".join(ROLES)),
    ("ts=", "--columns: 'ts=' names no column after '=' (e.g. ts=Date)"),
    ("ts=A,ts=B", "--columns: role 'ts' is given twice; give each role once"),
    ("open=P,close=P", "--columns: column 'P' is given for both 'open' and 'close'; a column has one role"),
])
def test_bad_mappings_name_the_pair_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(ColumnError) as info:
        parse_columns(text)
    assert str(info.value) == message


def _write(tmp_path: Path, text: str, name: str = "f.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_plain_long_format_file_loads_without_a_preset(tmp_path: Path) -> None:
    p = _write(tmp_path, "date,symbol,open,high,low,close,volume\n"
                         "2024-12-23,AAA,10,11,9,10.5,100\n2024-12-23,BBB,20,21,19,20.5,50\n"
                         "2024-12-24,AAA,10.5,11,10,10.8,200\n2024-12-24,BBB,20.5,21,20,20.8,60\n"
                         "2024-12-26,AAA,10.8,11.2,10.1,11,300\n2024-12-26,BBB,20.8,21,20.1,21,70\n")
    with pytest.raises(DataError) as info:
        load(p)
    assert str(info.value) == (f"{p}, column 'symbol': the file holds 2 symbols (AAA, BBB): pick one with --symbol "
                               "(symbol=...), or load it as a universe (load_universe)")
    r = load(p, symbol="BBB")
    d = r.data
    assert d.symbol == "BBB" and r.report.rows == 3 and r.report.preset is None
    assert d.ticks.last[4::5].tolist() == [20.5, 20.8, 21.0]  # each bar's close, its 5th tick
    assert d.ticks.last[0::5].tolist() == d.ticks.last[1::5].tolist() == [20.0, 20.5, 20.8]  # the open twice
    assert [s.date for s in d.sessions] == [dt.date(2024, 12, 23), dt.date(2024, 12, 24), dt.date(2024, 12, 26)]
    half = d.sessions[1]  # Christmas Eve: the NYSE closes at 13:00
    assert (half.open, half.close, half.tz) == (dt.time(9, 30), dt.time(13, 0), "America/New_York")
    k = d.ticks.ts[5:10]
    span = 3 * 3600 * 10**9 + 30 * 60 * 10**9  # 09:30 to 13:00
    assert k[0] == half.open_ns and k[-1] < half.close_ns and half.close_ns - half.open_ns == span
    assert [int(x - k[0]) for x in k] == [0, span // 8, span // 4, span // 2, 3 * span // 4]


def test_a_bar_on_a_holiday_is_refused_naming_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "date,open,high,low,close\n2024-12-24,10,11,9,10\n2024-12-25,10,11,9,10\n"
                         "2024-12-26,10,11,9,10\n", "XYZ.csv")
    with pytest.raises(DataError) as info:
        load(p)
    assert str(info.value) == (f"{p}, line 3, column 'date': a bar dated 2024-12-25, a day with no XNYS session "
                               "(a holiday or weekend); 1 such row: drop them or pass the instrument's exchange "
                               "calendar")


def test_columns_map_any_names_and_unknown_columns_fail(tmp_path: Path) -> None:
    p = _write(tmp_path, "When,Px,Qty\n2024-01-02T14:30:00Z,1.5,2\n2024-01-02T14:30:01Z,1.6,3\n")
    r = load(p, columns="ts=When,price=Px,size=Qty", symbol="X")
    assert r.report.kind == "trades" and r.data.ticks.last.tolist() == [1.5, 1.6]
    assert r.data.ticks.size.tolist() == [2.0, 3.0]
    with pytest.raises(DataError) as info:
        load(p, columns="ts=When,price=Last")
    assert str(info.value) == f"{p}: no column 'Last' (--columns price=...); the columns are When, Px, Qty"
    with pytest.raises(DataError, match="give a column mapping or a preset/spec, not both"):
        load(p, "oanda", columns="ts=When,price=Px")
    with pytest.raises(DataError, match="unknown role 'pricee'"):
        load(p, columns="ts=When,pricee=Px")


def test_quote_bars_become_two_quote_ticks_each(tmp_path: Path) -> None:
    p = _write(tmp_path, "ts_utc,bid_open,bid_close,ask_open,ask_close,bid_size,ask_size\n"
                         "2024-01-02T14:30:00Z,1.00,1.01,1.02,1.03,5,6\n2024-01-02T14:31:00Z,1.01,1.00,1.03,1.02,5,6\n")
    d = load(p, symbol="Q").data
    base = 1704205800 * 10**9
    assert d.ticks.ts.tolist() == [base, base + 45 * 10**9, base + 60 * 10**9, base + 105 * 10**9]
    assert d.ticks.bid.tolist() == [1.00, 1.01, 1.01, 1.00] and d.ticks.ask.tolist() == [1.02, 1.03, 1.03, 1.02]
    assert np.allclose(d.ticks.last, (d.ticks.bid + d.ticks.ask) / 2)
