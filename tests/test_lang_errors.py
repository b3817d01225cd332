"""Every error class: exact location (1-based line and column), message and hint."""

from __future__ import annotations

import pytest

from kestrel.lang import (
    Call,
    Compare,
    Diagnostic,
    Duration,
    Flat,
    KestrelSyntaxError,
    LangError,
    Limits,
    Module,
    Number,
    Offset,
    Order,
    Pass,
    Plan,
    Rule,
    Series,
    check,
    parse,
)


def diags(text: str, limits: Limits | None = None) -> tuple[Diagnostic, ...]:
    with pytest.raises(LangError) as exc:
        parse(text, limits)
    return exc.value.diagnostics


def one(text: str, limits: Limits | None = None) -> Diagnostic:
    found = diags(text, limits)
    assert len(found) == 1, found
    return found[0]


def test_error_type_is_a_value_error_with_one_name() -> None:
    assert issubclass(LangError, ValueError)
    assert KestrelSyntaxError is LangError


def test_type_error_last_compared_with_a_duration() -> None:
    d = one("PLAN a WHEN last > 30m: FLAT")
    assert (d.code, d.line, d.column) == ("type", 1, 18)
    assert d.message == "cannot compare Price with Duration (>)"
    assert d.hint is not None and "high(30m)" in d.hint


def test_stop_on_the_wrong_side_of_a_buy() -> None:
    d = one("PLAN a WHEN last > 1: BUY 100 MKT STOP +0.6%")
    assert (d.code, d.line, d.column, d.width) == ("wrong-side", 1, 40, 5)
    assert d.message == "STOP must be below the entry for a BUY"
    assert d.hint == "write STOP -0.6%"


def test_target_on_the_wrong_side_of_a_sell() -> None:
    d = one("PLAN a\nWHEN last > 1: SELL 100 MKT TARGET +1.2%")
    assert (d.code, d.line, d.column) == ("wrong-side", 2, 36)
    assert d.message == "TARGET must be below the entry for a SELL"
    assert d.hint == "write TARGET -1.2%"


def test_absolute_stop_checked_against_a_literal_limit_price() -> None:
    d = one("PLAN a WHEN last > 1: BUY 100 LMT 180 STOP @181")
    assert (d.code, d.column) == ("wrong-side", 44)
    assert d.message == "STOP must be below the entry for a BUY: @181 is not below 180"


def test_negative_quantity() -> None:
    d = one("PLAN a WHEN last > 1: BUY -100 MKT")
    assert (d.code, d.line, d.column, d.width) == ("bad-qty", 1, 27, 4)
    assert d.message == "quantity must be a positive whole number, got -100"
    assert d.hint == "the side says the direction: write SELL 100"


def test_fractional_quantity() -> None:
    d = one("PLAN a WHEN last > 1: BUY 10.5 MKT")
    assert (d.code, d.column) == ("bad-qty", 27)
    assert d.hint == "write 10 or 11"


def test_zero_window_and_zero_count() -> None:
    d = one("PLAN a WHEN last > high(0m): FLAT")
    assert (d.code, d.column) == ("zero-window", 25)
    assert d.message == "high's d must be longer than zero, got 0m"
    d = one("PLAN a WHEN last > sma(last, 0): FLAT")
    assert (d.code, d.column) == ("zero-window", 30)


def test_unknown_series_and_function_with_did_you_mean() -> None:
    found = diags("PLAN a WHEN lst > hihg(30m): FLAT")
    assert [(d.code, d.column, d.hint) for d in found] == [
        ("unknown-name", 13, "did you mean `last`?"),
        ("unknown-name", 19, "did you mean `high`?"),
    ]
    assert found[1].message == "unknown function `hihg`"


def test_series_called_like_a_function_and_function_used_bare() -> None:
    assert one("PLAN a WHEN last(5) > 1: FLAT").code == "not-function"
    d = one("PLAN a WHEN last > high: FLAT")
    assert d.code == "not-series" and d.hint == "call it: high(d: Duration) -> Price"


def test_wrong_argument_count_and_types() -> None:
    d = one("PLAN a WHEN last > sma(last): FLAT")
    assert d.code == "arity" and d.message == "sma takes 2 or 3 arguments, got 1"
    d = one("PLAN a WHEN last > high(30): FLAT")
    assert d.code == "type" and d.hint == "a window is a duration: high(30m)"
    d = one("PLAN a WHEN last > sma(pos, 20): FLAT")
    assert d.code == "type" and d.message == "sma's x must be a Price series"


def test_duplicate_plan_name_in_a_module() -> None:
    d = one("PLAN a WHEN last > 1: FLAT\nPLAN a WHEN last < 1: FLAT")
    assert (d.code, d.line, d.column) == ("duplicate-plan", 2, 6)
    assert d.message == "plan name `a` is already used by statement 1"


def test_window_longer_than_the_configured_maximum() -> None:
    d = one("PLAN a WHEN last > high(6d): FLAT")
    assert (d.code, d.column) == ("window-too-long", 25)
    assert d.hint == "use at most 5d"
    d = one("PLAN a WHEN last > high(2h): FLAT", Limits(max_window_seconds=3600))
    assert d.message == "high's d of 2h is longer than the data available (1h)"
    d = one("PLAN a WHEN last > sma(last, 500, 1h): FLAT")
    assert d.code == "window-too-long"


def test_pct_added_to_a_price() -> None:
    d = one("PLAN a WHEN last > vwap + 0.5%: FLAT")
    assert (d.code, d.column) == ("type", 25)
    assert d.hint == "to move a price by 0.5% multiply it: vwap * 1.005"


def test_condition_must_be_boolean() -> None:
    d = one("PLAN a WHEN last + 1: FLAT")
    assert d.code == "type" and d.message == "a WHEN condition must be true or false, not Price"


def test_qty_over_maxpos_and_bad_risk() -> None:
    d = one("PLAN a RISK maxpos 50 WHEN last > 1: BUY 100 MKT")
    assert (d.code, d.column) == ("over-risk", 42)
    d = one("PLAN a RISK maxpos 0 WHEN last > 1: FLAT")
    assert (d.code, d.column) == ("bad-risk", 13)


def test_trail_must_be_a_distance() -> None:
    d = one("PLAN a WHEN last > 1: BUY 1 MKT TRAIL @5")
    assert d.code == "bad-trail" and d.hint == "write TRAIL 0.5% or TRAIL 0.30"


def test_all_independent_errors_are_reported_in_source_order() -> None:
    found = diags("PLAN a\nWHEN lst > 30m: BUY -5 MKT STOP +1%\nWHEN last > high(0m): SELL 5 MKT TARGET +1%")
    assert [(d.line, d.column, d.code) for d in found] == [
        (2, 6, "unknown-name"),
        (2, 21, "bad-qty"),
        (2, 33, "wrong-side"),
        (3, 18, "zero-window"),
        (3, 41, "wrong-side"),
    ]


def test_syntax_error_missing_colon() -> None:
    d = one("PLAN a\nWHEN last > 3 BUY 100")
    assert (d.code, d.line, d.column, d.width) == ("syntax", 2, 15, 3)
    assert d.message == "unexpected `BUY`"
    assert "`:`" in d.expected and "AND" in d.expected
    assert d.hint == "end the condition with `:` before the actions: WHEN cond: action"


def test_syntax_error_misspelt_keyword() -> None:
    d = one("PLAN a WEHN last > 1: FLAT")
    assert (d.line, d.column) == (1, 8)
    assert d.expected == ("WHEN", "ON", "UNTIL", "FOR", "RISK")
    assert d.hint == "did you mean `WHEN`?"


def test_syntax_error_fractional_duration() -> None:
    d = one("PLAN a WHEN last > high(1.5h): FLAT")
    assert (d.column, d.width, d.message) == (25, 4, "unexpected `1.5h`")
    assert d.hint is not None and "90m" in d.hint


def test_syntax_error_plan_without_rules_points_at_the_end() -> None:
    d = one("PLAN a ON AAPL\n")
    assert (d.line, d.column, d.message) == (1, 15, "unexpected end of the document")
    assert d.hint == "a PLAN needs at least one rule: WHEN cond: action"


def test_syntax_error_mkt_with_price_and_symbols() -> None:
    assert one("PLAN a WHEN last > 1: BUY 1 MKT 180").hint == (
        "MKT takes no price; write LMT price for a limit order"
    )
    assert one("PLAN a ON aapl WHEN last > 1: FLAT").hint == "instrument symbols are upper case: ON AAPL"
    assert one("PLAN a WHEN last > 1 && pos > 0: FLAT").hint == "write AND, not &&"
    assert one('{"plan": 1}').hint is not None


def test_empty_document() -> None:
    d = one("  # nothing but a comment\n")
    assert d.code == "empty" and d.line is None


def test_repair_text_has_place_caret_expected_and_hint() -> None:
    with pytest.raises(LangError) as exc:
        parse("PLAN a\nWHEN last > hihg(30m): FLAT")
    assert str(exc.value) == (
        "1 error in Kestrel document:\n"
        "line 2, column 13: unknown function `hihg`\n"
        "  WHEN last > hihg(30m): FLAT\n"
        "              ^^^^\n"
        "  hint: did you mean `high`?"
    )


def test_check_locates_code_built_asts_by_path() -> None:
    good = Rule(Compare(">", Series("last"), Number(1)), (Flat(),))
    bad = Rule(
        Compare(">", Series("last"), Call("high", (Duration(0, "m"),))),
        (Flat(), Order("buy", 1, "mkt", stop=Offset("pct", 1.0))),
    )
    plan = Plan("p", (good, bad))
    found = check(plan)
    assert [(d.path, d.code) for d in found] == [
        ("rule 2", "zero-window"),
        ("rule 2, action 2", "wrong-side"),
    ]
    assert all(d.line is None for d in found)
    found = check(Module((Pass(), plan)))
    assert [d.path for d in found] == ["statement 2, rule 2", "statement 2, rule 2, action 2"]
    assert "statement 2, rule 2: high's d must be longer than zero" in found[0].render()


def test_check_returns_nothing_for_a_valid_ast() -> None:
    assert check(Plan("p", (Rule(Compare(">", Series("last"), Number(1)), (Flat(),)),))) == []


def test_check_rejects_single_statement_modules_and_bad_names() -> None:
    assert [d.code for d in check(Module((Pass(),)))] == ["module-size"]
    plan = Plan("not a name", (Rule(Compare(">", Series("last"), Number(1)), (Flat(),)),))
    assert [d.code for d in check(plan)] == ["bad-name"]


def test_repair_text_is_bounded() -> None:
    long_line = "PLAN a WHEN " + " AND ".join(["last > 1"] * 400) + " AND lst > 1: FLAT"
    with pytest.raises(LangError) as exc:
        parse(long_line)
    text = str(exc.value)
    excerpt, caret = text.splitlines()[2:4]
    assert len(excerpt) < 110 and excerpt.strip().startswith("…")
    assert excerpt[caret.index("^") : caret.index("^") + 3] == "lst"
    many = "PLAN a\n" + "".join(f"WHEN lst{i} > 1: FLAT\n" for i in range(30))
    with pytest.raises(LangError) as exc:
        parse(many)
    assert len(exc.value.diagnostics) == 30
    assert str(exc.value).endswith("... and 18 more; fix these first")


def test_byte_order_mark_is_ignored_and_columns_are_as_an_editor_shows_them() -> None:
    assert parse("\ufeffPASS") == Pass()
    # the BOM is invisible in an editor: `lst` is at column 13 there, and the excerpt is the
    # line as written (no stand-in character for the mark)
    d = one("\ufeffPLAN a WHEN lst > 1: FLAT")
    assert (d.line, d.column, d.excerpt) == (1, 13, "PLAN a WHEN lst > 1: FLAT")
    d = one("\ufeffPLN a WHEN last > 1: FLAT")
    assert (d.line, d.column, d.hint) == (1, 1, "did you mean `PLAN`?")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_positions_with_any_line_ending(newline: str) -> None:
    text = newline.join(["PLAN a", "", "WHEN last > 1 AND", "  lst > 2: FLAT", ""])
    d = one(text)
    assert (d.line, d.column, d.width, d.excerpt) == (4, 3, 3, "  lst > 2: FLAT")
    syntax = one(newline.join(["PLAN a", "WHEN last > 1", "FLAT"]))
    assert (syntax.line, syntax.column, syntax.excerpt) == (3, 1, "FLAT")
    unix = "\n".join(["PLAN a", "", "WHEN last > 1 AND", "  last > 2: FLAT", ""])
    assert parse(text.replace("lst", "last")) == parse(unix)


def test_tabs_count_one_column_and_the_caret_lines_up() -> None:
    d = one("PLAN a\n\tWHEN\tlast >\thgh(30m): FLAT")
    assert (d.line, d.column) == (2, 14)
    excerpt, caret = str(LangError([d])).split("\n")[2:4]
    assert excerpt[caret.index("^") : caret.index("^") + 3] == "hgh"


def test_unicode_positions_count_code_points() -> None:
    d = one('STANDDOWN "é too wide" x')
    assert (d.line, d.column) == (1, 24)
    d = one("PLAN café WHEN last > 1: FLAT")
    assert (d.column, d.hint) == (9, "names use ASCII letters, digits and _ only")


def test_did_you_mean_prefers_what_the_parser_accepts_and_spares_known_names() -> None:
    assert one("PLAN a WHN last > 1: FLAT").hint == "did you mean `WHEN`?"
    assert one("PLAN a RISK maxpso 5 WHEN last > 1: FLAT").hint == "did you mean `maxpos`?"
    # `last` is a series, not a misspelt FLAT: no keyword suggestion for a known name
    assert one("PLAN a WHEN last > 1: last").hint == (
        "`last` is a value; after `:` comes an action: BUY, SELL, FLAT or CANCEL"
    )
    assert one("PLAN a WHEN last > 1 last: FLAT").hint is None


def test_markdown_fences_get_a_repair_hint() -> None:
    d = one("```\nPLAN a WHEN last > 1: FLAT\n```")
    assert (d.line, d.column, d.message) == (1, 1, "unexpected backquote `")
    assert d.hint == "reply with the bare Kestrel text: no ``` fences or backquotes around it"


def test_twelve_hour_times_get_a_repair_hint() -> None:
    d = one("PLAN a WHEN time > 9:30am: FLAT")
    assert (d.column, d.hint) == (24, "times are 24-hour hh:mm: write 09:30 or 15:45, not 9:30am or 3:45pm")


def test_limit_order_without_its_price() -> None:
    d = one("PLAN a WHEN last > 1: BUY 10 LMT STOP -1%")
    assert (d.column, d.width, d.message) == (34, 4, "`STOP` is a keyword, not a series")
    assert d.hint == "a LMT order needs its price right after LMT: BUY 100 LMT 182.40 STOP -1%, or use MKT"
    d = one("PLAN a WHEN last > 1: BUY 10 STP TTL 5m")
    assert (d.column, d.hint) == (38, "a STP order needs its price right after STP: BUY 100 STP 182.40 TTL ...")
    d = one("PLAN a WHEN last > 1: BUY 10 LMT 182.4 1%")
    assert d.hint == "after the order come only STOP, TARGET, TRAIL, TTL, `;` or a repeat like x3"
    assert one("PLAN a WHEN last > 1: BUY 10 MKT 182.4").hint == (
        "MKT takes no price; write LMT price for a limit order"
    )


def test_rule_without_plan_and_stray_dots() -> None:
    assert one("WHEN last > 1: FLAT").hint == (
        "a rule belongs to a plan: start with PLAN name, then WHEN cond: action"
    )
    assert one("PLAN a WHEN last > 1.2.3: FLAT").hint == "write numbers like 182.40: digits, one point, digits"
    assert one("VIEW v: quote, ...").hint is None
    assert one("PLAN a WHEN last > .5: FLAT").hint == "write numbers with a leading digit: 0.5, not .5"


@pytest.mark.parametrize(
    ("text", "code", "column", "hint"),
    [
        ("PLAN a UNTIL 25:00 WHEN last > 1: FLAT", "bad-time", 14, "write hh:mm between 00:00 and 23:59"),
        ("PLAN a WHEN last > 1: BUY 1 MKT STOP 0%", "bad-offset", 38,
         "give a distance from the entry: STOP -0.5% or STOP -0.50, or leave STOP out"),
        ("PLAN a WHEN last > 1: BUY 1 MKT STOP -100%", "bad-offset", 38, "write e.g. STOP -2%"),
        ("PLAN a WHEN last / 0 > 1: FLAT", "div-zero", 20, "divide by a number other than 0"),
        ("PLAN a WHEN last > sma(last,2,2d): FLAT", "bad-timeframe", 31,
         "use bars of 1d or less, e.g. 5m"),
        ("PLAN a UNTIL 15:00 FOR 1h WHEN last > 1: FLAT", "duplicate", 24,
         "give each header part once: PLAN name [ON SYM] [UNTIL hh:mm | FOR dur] [RISK ...]"),
        ("PLAN a WHEN last > 1: BUY 1 MKT STOP -1% STOP -2%", "duplicate", 42, "keep a single STOP"),
        ("PLAN a RISK maxpos 1 maxpos 2 WHEN last > 1: FLAT", "duplicate", 22, "keep a single maxpos"),
        ("PLAN a RISK maxpos 1.5 WHEN last > 1: FLAT", "bad-risk", 20, "write maxpos 1 or maxpos 2"),
        ("VIEW v: quote BUDGET 600.5", "bad-budget", 22, "write BUDGET 600"),
        ("PLAN a WHEN last > 1: SELL 1 MKT STOP @0", "bad-offset", 39,
         "write STOP @182.40, or an offset from the entry like STOP +0.5%"),
        ("PLAN a WHEN last > 1: BUY 1 LMT 100 STOP @101", "wrong-side", 42,
         "STOP below the entry price 100"),
        ("PLAN a WHEN last > 1: BUY 1 MKT TRAIL 100%", "bad-trail", 39, "write TRAIL 0.5% or TRAIL 0.30"),
        ("PLAN a WHEN last > 1: FLAT x0", "bad-repeat", 28, "write x2 to fire twice, or drop xN to fire once"),
        ("PLAN a WHEN last > sma(last,20000): FLAT", "window-too-long", 29,
         "use at most 10000, or bars of a longer timeframe"),
        ("PLAN a WHEN -time > 1: FLAT", "type", 13, "`-` negates numbers; NOT negates a condition"),
        ("PLAN a FOR 0m WHEN last > 1: FLAT", "zero-window", 12, "write e.g. 1m"),
        ("PLAN a WHEN last > 1: BUY 1 MKT TTL 0s", "zero-window", 37, "write e.g. 1s"),
        ("VIEW v: bars(n=1, n=2)", "duplicate", 19, "keep a single n="),
        ("VIEW v: bars(n=1, 2)", "arg-order", 19, "put positional arguments first: bars(5m, n=24)"),
        ("PLAN a WHEN NOT last: FLAT", "type", 17, "negate a comparison: NOT spread > 0.05"),
        ("PLAN a WHEN last > 1 AND pos: FLAT", "type", 26, "compare it: e.g. last > vwap"),
        ("PLAN a WHEN time CROSSES ABOVE 10:00: FLAT", "type", 26, "compare the clock with a time: time >= 15:30"),
        ("PLAN a WHEN last > 1: BUY 1 LMT 15:00", "type", 33, "write a price: 182.40, ask+0.02 or vwap*0.99"),
        ("PLAN a WHEN last > 1: BUY 1 LMT 0", "bad-price", 33, "write a price such as 182.40, or a MKT order"),
    ],
)
def test_error_table(text: str, code: str, column: int, hint: str | None) -> None:
    d = one(text)
    assert (d.code, d.line, d.column) == (code, 1, column)
    if hint is not None:
        assert d.hint == hint


def test_code_only_errors_by_path() -> None:
    from kestrel.lang import StandDown, View

    rule = Rule(Compare(">", Series("last"), Number(1)), (Order("buy", 1, "lmt"),))
    found = check(Plan("p", (rule,), instrument="aapl"))
    assert [(d.code, d.path) for d in found] == [
        ("bad-symbol", "document"),
        ("no-price", "rule 1, action 1"),
    ]
    assert [d.code for d in check(Plan("p", ()))] == ["no-rules"]
    assert [d.code for d in check(Plan("p", (Rule(Number(1), (Flat(),)),)))] == ["type"]
    assert [d.code for d in check(StandDown("two\nlines"))] == ["bad-string"]
    assert [d.code for d in check(View("v", ()))] == ["no-panes"]
    mkt = Order("sell", 1, "mkt", price=Number(5))
    assert [d.code for d in check(Plan("p", (Rule(Compare(">", Series("last"), Number(1)), (mkt,)),)))] == ["mkt-price"]


@pytest.mark.parametrize(
    ("text", "column", "hint"),
    [
        ("PLAN a WHEN vol > 1e6: FLAT", 19, "write numbers in full: 1000000, not 1e6 or 1_000_000"),
        ("PLAN a WHEN vol > 1_000: FLAT", 19, "write numbers in full: 1000000, not 1e6 or 1_000_000"),
        ("PLAN a WHEN vol > 1,000: FLAT", 20, "write numbers without thousands separators: 1000000"),
        ("PLAN a WHEN last > 1: BUY 100 shares", 31,
         "write the order type after the quantity: MKT, LMT price or STP price"),
        ("PLAN a WHEN last > 1 THEN BUY 1", 22,
         "end the condition with `:` before the actions: WHEN cond: action"),
        ("IF last > 1: BUY 1", 1,
         'a reply is one statement: PLAN name WHEN cond: action, VIEW name: panes, STANDDOWN "why" or PASS'),
        ("PLAN a WHEN last > 1: BUY 1 MKT TP +2%", 33, "write TARGET +1% (Kestrel's word for TP)"),
        ("PLAN a WHEN last > 1: BUY 1 MKT sl -1%", 33, "write STOP -0.5% (Kestrel's word for sl)"),
        ("PLAN a WHEN last > 1: LONG 100 MKT", 23, "write BUY (Kestrel's word for LONG)"),
        ("PLAN a WHEN last > 1: BUY 1 MKT, FLAT", 32,
         "separate the actions of a rule with `;`: BUY 100 MKT; CANCEL"),
        ("PLAN a WHEN last > 1: BUY 1 MKT AND FLAT", 33,
         "separate the actions of a rule with `;`: BUY 100 MKT; CANCEL"),
        ("PLAN a: WHEN last > 1: FLAT", 7,
         "the plan header takes no `:`; rules follow it: PLAN name WHEN cond: action"),
        ("PLAN my plan WHEN last > 1: FLAT", 9, "a plan name is one word: my_plan, not my plan"),
        ("PLAN a UNTL 15:00 WHEN last > 1: FLAT", 8, "did you mean `UNTIL`?"),
        ("PLAN a WHEN last > 1: BUY 1 MKT TTL 20", 37, "a duration needs its unit: 20m or 20s"),
        ("STANDDOWN spread too wide", 11, 'quote the reason: STANDDOWN "spread too wide"'),
        ("VIEW: quote", 5, "name the view: VIEW scout: quote, bars(5m, 24)"),
        ("PLAN a WHEN ema(close,20) > 1: FLAT", 17,
         "the current trade price is `last` (bars close into sma/ema/atr with a timeframe)"),
        ("PLAN a WHEN volume > 1: FLAT", 13, "session volume is `vol`; the current trade's size is `size`"),
    ],
)
def test_phrases_from_other_languages_get_kestrel_repairs(text: str, column: int, hint: str) -> None:
    d = one(text)
    assert (d.line, d.column, d.hint) == (1, column, hint)


def test_a_bad_limit_price_gives_no_follow_on_bracket_error() -> None:
    assert [d.code for d in diags("PLAN a WHEN last > 1: BUY 1 LMT 0 STOP @5")] == ["bad-price"]


def test_numbers_in_repair_text_are_written_as_kestrel_reads_them() -> None:
    # a hint must be valid Kestrel: 0.00001, never the exponent form 1e-05 the lexer rejects
    d = one("PLAN p RISK maxloss -0.00001\nWHEN last > 1: BUY 1 MKT")
    assert d.message == "maxloss must be positive, got -0.00001"
    assert d.hint == "write maxloss 0.00001"
    parse("PLAN p RISK maxloss 0.00001\nWHEN last > 1: BUY 1 MKT")
