"""The typing of operators: a constant Number adapts to the numeric type beside it, a computed
Number (rsi, zscore, a ratio) adds to and compares with Numbers only; checked against a table
of the allowed operand kinds written out by hand (docs/language.md, section 5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.lang import LangError, parse
from kestrel.lang.registry import FUNCTIONS
from kestrel.lang.signature import EXAMPLE_ARGUMENTS

# representative expressions of each operand kind
EXAMPLES: dict[str, tuple[str, ...]] = {
    "Price": ("last", "vwap", "mid", "sma(last, 20)", "stdev(last, 20)", "high(30m)", "atr(14)",
              "max(bid, 1)"),
    "Qty": ("vol", "size", "pos"),
    "Money": ("pnl", "upnl", "rpnl"),
    "Pct": ("chg(5m)", "0.5%"),
    "Computed": ("rsi(14)", "zscore(last, 20)", "last / vwap", "vol / size", "rsi(14) - 50",
                 "abs(zscore(mid, 20))"),
    "Constant": ("2", "0.5", "50", "(2 * 3)", "-(1 + 2)", "(7 / 2)"),
}
KINDS = tuple(EXAMPLES)

# `+`, `-`, comparisons and CROSSES: the same kind, or a constant on either side
SAME_OR_CONSTANT: frozenset[tuple[str, str]] = frozenset({
    ("Price", "Price"), ("Qty", "Qty"), ("Money", "Money"), ("Pct", "Pct"),
    ("Computed", "Computed"), ("Computed", "Constant"), ("Constant", "Computed"),
    ("Constant", "Constant"),
    ("Price", "Constant"), ("Constant", "Price"), ("Qty", "Constant"), ("Constant", "Qty"),
    ("Money", "Constant"), ("Constant", "Money"), ("Pct", "Constant"), ("Constant", "Pct"),
})
# `*`: scaling by any Number, and the notional Price * Qty
TIMES: frozenset[tuple[str, str]] = frozenset(
    {(kind, number) for kind in KINDS for number in ("Computed", "Constant")}
    | {(number, kind) for kind in KINDS for number in ("Computed", "Constant")}
    | {("Price", "Qty"), ("Qty", "Price")}
)
# `/`: scaling by any Number, and the ratio of two values of one kind
DIVIDE: frozenset[tuple[str, str]] = frozenset(
    {(kind, number) for kind in KINDS for number in ("Computed", "Constant")}
    | {(kind, kind) for kind in KINDS}
)
ALLOWED: dict[str, frozenset[tuple[str, str]]] = {
    "+": SAME_OR_CONSTANT, "-": SAME_OR_CONSTANT, "*": TIMES, "/": DIVIDE,
    "<": SAME_OR_CONSTANT, "<=": SAME_OR_CONSTANT, ">": SAME_OR_CONSTANT,
    ">=": SAME_OR_CONSTANT, "==": SAME_OR_CONSTANT, "!=": SAME_OR_CONSTANT,
    "CROSSES ABOVE": SAME_OR_CONSTANT, "CROSSES BELOW": SAME_OR_CONSTANT,
}
ARITHMETIC = ("+", "-", "*", "/")


def condition(left: str, op: str, right: str) -> str:
    """A WHEN condition applying `op` to the parenthesised operands; an arithmetic result is
    compared with a constant."""
    if op in ARITHMETIC:
        return f"(({left}) {op} ({right})) > 1"
    return f"({left}) {op} ({right})"


def accepted(cond: str) -> bool:
    try:
        parse(f"PLAN a WHEN {cond}: FLAT")
    except LangError as error:
        assert [d.code for d in error.diagnostics] == ["type"], error
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KINDS), st.sampled_from(KINDS), st.sampled_from(tuple(ALLOWED)),
       st.data())
def test_every_operand_pair_is_typed_as_the_table_says(
    left_kind: str, right_kind: str, op: str, data: st.DataObject
) -> None:
    left = data.draw(st.sampled_from(EXAMPLES[left_kind]))
    right = data.draw(st.sampled_from(EXAMPLES[right_kind]))
    want = (left_kind, right_kind) in ALLOWED[op]
    assert accepted(condition(left, op, right)) == want, (left, op, right)


@pytest.mark.parametrize("op", tuple(ALLOWED))
@pytest.mark.parametrize("right_kind", KINDS)
@pytest.mark.parametrize("left_kind", KINDS)
def test_the_first_example_of_every_pair(left_kind: str, right_kind: str, op: str) -> None:
    cond = condition(EXAMPLES[left_kind][0], op, EXAMPLES[right_kind][0])
    assert accepted(cond) == ((left_kind, right_kind) in ALLOWED[op]), cond


@pytest.mark.parametrize("cond", [
    "rsi(14) < 30", "zscore(last, 20) > 2", "last > sma(last, 20) + 0.5", "last + 0.5 > vwap",
    "rsi(14) CROSSES ABOVE 30", "rsi(14) > rsi(50)", "last / vwap > 1.001",
    "last > vwap * (last / vwap)", "last > vwap - (0.5 * 2)", "chg(5m) > 0.5",
    "max(rsi(14), 30) < 70", "max(spread, 0.01) < 0.05",
])
def test_unit_less_numbers_with_numbers_and_constant_offsets_are_accepted(cond: str) -> None:
    assert accepted(cond), cond


def test_a_computed_number_added_to_a_price_is_one_clear_error_with_a_fix() -> None:
    with pytest.raises(LangError) as exc:
        parse("PLAN a WHEN rsi(14) + last > 50: FLAT")
    (d,) = exc.value.diagnostics
    assert (d.code, d.line, d.column) == ("type", 1, 21)
    assert d.message == "cannot apply `+` to Number and Price"
    assert d.hint == ("rsi(14) is a unit-less Number, last a Price: test each on its own and join "
                      "them with AND, e.g. rsi(14) > 50 AND last > vwap")
    parse("PLAN a WHEN rsi(14) > 50 AND last > vwap: FLAT")  # the fix checks


@pytest.mark.parametrize("cond, code", [
    ("zscore(last, 20) > last", "type"), ("last - rsi(14) > 1", "type"),
    ("last / vwap < chg(5m)", "type"), ("max(rsi(14), last) > 1", "type"),
    ("pnl > rsi(14)", "type"), ("rsi(14) CROSSES ABOVE vwap", "type"),
])
def test_a_computed_number_beside_a_typed_value_is_rejected(cond: str, code: str) -> None:
    with pytest.raises(LangError) as exc:
        parse(f"PLAN a WHEN {cond}: FLAT")
    assert [d.code for d in exc.value.diagnostics] == [code]


def test_an_order_price_is_a_price_or_a_constant() -> None:
    parse("PLAN a WHEN last > 1: BUY 1 LMT 100 + 2")
    parse("PLAN a WHEN last > 1: BUY 1 LMT vwap * (last / vwap)")
    with pytest.raises(LangError) as exc:
        parse("PLAN a WHEN last > 1: BUY 1 LMT rsi(14)")
    (d,) = exc.value.diagnostics
    assert d.message == "an order price must be a Price, not a unit-less Number"


# arguments each parameter kind refuses
BAD_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "Duration": ("5", "0m", "last"), "Count": ("0", "1.5", "vol", "20000", "30m"),
    "Timeframe": ("5", "2d", "0m"), "PriceSeries": ("vol", "1", "sma(last, 5)"),
    "Number": ("0", "last", "-1"), "Numeric": ("30m", "10:30"),
}


def bad_calls() -> list[str]:
    """Calls of every function with one argument wrong, at every parameter; the wrong number
    of arguments; counts that do not increase; a bounded function compared out of its range."""
    calls = []
    for name, spec in FUNCTIONS.items():
        good = [EXAMPLE_ARGUMENTS[p.name] for p in spec.params]
        for index, param in enumerate(spec.params):
            for bad in BAD_ARGUMENTS[param.type]:
                calls.append(f"{name}({', '.join(good[:index] + [bad] + good[index + 1:])}) > 1")
        calls.append(f"{name}({', '.join(good + ['1'])}) > 1")
        if spec.increasing:
            swapped = [{"12": "26", "26": "12"}.get(arg, arg) for arg in good]
            calls.append(f"{name}({', '.join(swapped)}) > 1")
        if spec.bounds is not None:
            calls.append(f"{spec.example} < {spec.bounds[1] + 1:g}")
    return calls


def code_in(hint: str) -> str | None:
    """The code a hint suggests (after `e.g.` or `is a duration:`), if it suggests a call."""
    for marker in ("e.g. ", "is a duration: "):
        if marker in hint:
            code = hint.split(marker, 1)[1]
            return code if "(" in code else None
    return None


def test_every_function_hint_suggests_code_that_checks() -> None:
    suggested = set()
    for cond in bad_calls():
        with pytest.raises(LangError) as exc:
            parse(f"PLAN a WHEN {cond}: FLAT")
        for diagnostic in exc.value.diagnostics:
            code = code_in(diagnostic.hint or "")
            if code is None:
                continue
            condition = code if any(op in code for op in "<>=") else f"{code} > 1"
            parse(f"PLAN a WHEN {condition}: FLAT")  # raises if the suggestion is not valid
            suggested.add(code)
    # the example of every function over windows, counts or series is suggested somewhere
    # (abs, min and max, over any numbers, are repaired by their signature)
    assert {spec.example for spec in FUNCTIONS.values()
            if any(p.type != "Numeric" for p in spec.params)} <= {
        code.split(" <")[0] for code in suggested}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_example_checks(name: str) -> None:
    parse(f"PLAN a WHEN {FUNCTIONS[name].example} > 1: FLAT")
