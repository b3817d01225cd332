"""Parsing: the reference examples of the four statements, keyword case, layout, precedence, literals."""

from __future__ import annotations

import pytest

from kestrel.lang import (
    And,
    Arith,
    Call,
    Cancel,
    Compare,
    Crosses,
    Duration,
    Flat,
    For,
    Ident,
    LangError,
    Module,
    Neg,
    Not,
    Number,
    Offset,
    Or,
    Order,
    PaneArg,
    PaneRef,
    Pass,
    Percent,
    Plan,
    Risk,
    Rule,
    Series,
    StandDown,
    TimeOfDay,
    Until,
    View,
    format,
    parse,
)

REFERENCE_EXAMPLE = """\
PLAN orb ON AAPL UNTIL 15:45 RISK maxpos 200 maxloss 400
WHEN last > high(30m) AND spread < 0.05: BUY 100 LMT ask+0.02 STOP -0.6% TARGET +1.2% TTL 20m
WHEN last < low(30m): SELL 100 MKT STOP +0.6% TARGET -1.2%

VIEW scout: quote, bars(5m, 24), levels BUDGET 600

STANDDOWN "spread too wide to trade"

PASS
"""


def test_design_example_parses_to_the_expected_ast() -> None:
    expected = Module(
        (
            Plan(
                "orb",
                (
                    Rule(
                        And(
                            (
                                Compare(">", Series("last"), Call("high", (Duration(30, "m"),))),
                                Compare("<", Series("spread"), Number(0.05)),
                            )
                        ),
                        (
                            Order(
                                "buy",
                                100,
                                "lmt",
                                Arith("+", Series("ask"), Number(0.02)),
                                stop=Offset("pct", -0.6),
                                target=Offset("pct", 1.2),
                                ttl=Duration(20, "m"),
                            ),
                        ),
                    ),
                    Rule(
                        Compare("<", Series("last"), Call("low", (Duration(30, "m"),))),
                        (
                            Order(
                                "sell",
                                100,
                                "mkt",
                                stop=Offset("pct", 0.6),
                                target=Offset("pct", -1.2),
                            ),
                        ),
                    ),
                ),
                instrument="AAPL",
                expiry=Until(TimeOfDay(15, 45)),
                risk=Risk(maxpos=200, maxloss=400.0),
            ),
            View(
                "scout",
                (
                    PaneRef("quote"),
                    PaneRef("bars", (PaneArg(Duration(5, "m")), PaneArg(Number(24)))),
                    PaneRef("levels"),
                ),
                budget=600,
            ),
            StandDown("spread too wide to trade"),
            Pass(),
        )
    )
    assert parse(REFERENCE_EXAMPLE) == expected


def _when(cond: object, *actions: object, repeat: int = 1) -> Rule:
    return Rule(cond, actions, repeat)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "PLAN p FOR 90m RISK maxpos 200 maxloss 400 maxorders 5\nWHEN last > vwap: BUY 10 MKT x3",
            Plan(
                "p",
                (_when(Compare(">", Series("last"), Series("vwap")), Order("buy", 10, "mkt"), repeat=3),),
                expiry=For(Duration(90, "m")),
                risk=Risk(maxpos=200, maxloss=400.0, maxorders=5),
            ),
        ),
        (
            "PLAN p\nWHEN sma(mid,20) > ema(last,50) AND atr(14) < 2 AND chg(5m) > 0.5% AND "
            "range(30m) < 3: FLAT",
            Plan(
                "p",
                (
                    _when(
                        And(
                            (
                                Compare(
                                    ">",
                                    Call("sma", (Series("mid"), Number(20))),
                                    Call("ema", (Series("last"), Number(50))),
                                ),
                                Compare("<", Call("atr", (Number(14),)), Number(2)),
                                Compare(">", Call("chg", (Duration(5, "m"),)), Percent(0.5)),
                                Compare("<", Call("range", (Duration(30, "m"),)), Number(3)),
                            )
                        ),
                        Flat(),
                    ),
                ),
            ),
        ),
        (
            "PLAN p\nWHEN last > 1: BUY 100 MKT STOP -0.50 TARGET @182.40 TRAIL 0.3%",
            Plan(
                "p",
                (
                    _when(
                        Compare(">", Series("last"), Number(1)),
                        Order(
                            "buy",
                            100,
                            "mkt",
                            stop=Offset("abs", -0.5),
                            target=Offset("at", 182.4),
                            trail=Offset("pct", 0.3),
                        ),
                    ),
                ),
            ),
        ),
        (
            "PLAN p\nWHEN pos > 0 AND upnl < -100 AND time > 15:00: FLAT",
            Plan(
                "p",
                (
                    _when(
                        And(
                            (
                                Compare(">", Series("pos"), Number(0)),
                                Compare("<", Series("upnl"), Number(-100)),
                                Compare(">", Series("time"), TimeOfDay(15, 0)),
                            )
                        ),
                        Flat(),
                    ),
                ),
            ),
        ),
        (
            "PLAN p\nWHEN last > 1: CANCEL",
            Plan("p", (_when(Compare(">", Series("last"), Number(1)), Cancel()),)),
        ),
        ("STANDDOWN", StandDown()),
        ("PASS", Pass()),
        ("VIEW v: quote", View("v", (PaneRef("quote"),))),
    ],
)
def test_design_fragments_parse(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_single_statement_is_returned_bare_and_several_as_module() -> None:
    assert parse("PASS") == Pass()
    assert parse("PASS\nSTANDDOWN") == Module((Pass(), StandDown()))


def test_keywords_are_case_insensitive_and_formatted_upper_case() -> None:
    lower = parse("plan a on AAPL until 15:45 risk MaxPos 10\nwhen last > 1 and not pos > 0: buy 10 lmt bid stop -1% x2")
    upper = parse("PLAN a ON AAPL UNTIL 15:45 RISK maxpos 10\nWHEN last > 1 AND NOT pos > 0: BUY 10 LMT bid STOP -1% x2")
    assert lower == upper
    assert format(lower).startswith("PLAN a ON AAPL UNTIL 15:45 RISK maxpos 10\nWHEN last > 1 AND NOT pos > 0:")


def test_names_are_case_sensitive() -> None:
    with pytest.raises(LangError) as exc:
        parse("PLAN a WHEN LAST > 1: FLAT")
    assert exc.value.diagnostics[0].hint == "did you mean `last`?"


def test_layout_and_comments_are_insignificant() -> None:
    compact = parse("PLAN a WHEN last > 1: FLAT WHEN pos < 0: CANCEL")
    spread = parse("# header\nPLAN a   # the plan\n\n  WHEN last\n > 1:\tFLAT\nWHEN pos < 0: CANCEL # done\n")
    assert compact == spread


def test_keyword_words_are_names_where_only_a_name_fits() -> None:
    view = parse("VIEW plan: plan, bars(mode=when)")
    assert view == View("plan", (PaneRef("plan"), PaneRef("bars", (PaneArg(Ident("when"), "mode"),))))


def test_instrument_symbols_may_hold_dots() -> None:
    plan = parse("PLAN a ON BRK.B WHEN last > 1: FLAT")
    assert isinstance(plan, Plan) and plan.instrument == "BRK.B"


def _cond(text: str) -> object:
    plan = parse(f"PLAN a WHEN {text}: FLAT")
    assert isinstance(plan, Plan)
    return plan.rules[0].cond


def test_and_binds_tighter_than_or_and_chains_flatten() -> None:
    a, b, c, d = (Compare(">", Series(n), Number(1)) for n in ("last", "bid", "ask", "mid"))
    assert _cond("last > 1 OR bid > 1 AND ask > 1 OR mid > 1") == Or((a, And((b, c)), d))
    assert _cond("last > 1 AND bid > 1 AND ask > 1") == And((a, b, c))
    assert _cond("(last > 1 AND bid > 1) AND ask > 1") == And((And((a, b)), c))
    assert _cond("NOT last > 1 AND bid > 1") == And((Not(a), b))


def test_arithmetic_precedence_and_left_associativity() -> None:
    assert _cond("last - 1 - 2 * 3 / 4 > 0") == Compare(
        ">",
        Arith(
            "-",
            Arith("-", Series("last"), Number(1)),
            Arith("/", Arith("*", Number(2), Number(3)), Number(4)),
        ),
        Number(0),
    )
    assert _cond("last > vwap - (1 - 2)") == Compare(
        ">", Series("last"), Arith("-", Series("vwap"), Arith("-", Number(1), Number(2)))
    )


def test_negative_literals_fold_but_parenthesised_ones_stay_negations() -> None:
    assert _cond("pnl < -200") == Compare("<", Series("pnl"), Number(-200))
    assert _cond("pnl < -(200)") == Compare("<", Series("pnl"), Neg(Number(200)))
    assert _cond("chg(5m) < -0.5%") == Compare("<", Call("chg", (Duration(5, "m"),)), Percent(-0.5))
    assert _cond("-last < 0") == Compare("<", Neg(Series("last")), Number(0))


def test_crosses() -> None:
    assert _cond("sma(last, 20) CROSSES BELOW vwap") == Crosses(
        "below", Call("sma", (Series("last"), Number(20))), Series("vwap")
    )


def test_time_of_day_with_seconds_and_single_digit_hour() -> None:
    assert _cond("time >= 9:30:15") == Compare(">=", Series("time"), TimeOfDay(9, 30, 15))


def test_order_defaults_and_offsets() -> None:
    plan = parse("PLAN a WHEN last > 1: BUY 5 TARGET 1% STOP @9 TRAIL -0.5; SELL 3 STP bid - 0.1")
    assert isinstance(plan, Plan)
    buy, sell = plan.rules[0].actions
    # no order type means MKT; an unsigned offset is positive; TRAIL keeps only its distance
    assert buy == Order(
        "buy", 5, "mkt", stop=Offset("at", 9.0), target=Offset("pct", 1.0), trail=Offset("abs", 0.5)
    )
    assert sell == Order("sell", 3, "stp", Arith("-", Series("bid"), Number(0.1)))


def test_expiry_for_and_risk_in_any_header_order() -> None:
    plan = parse("PLAN a RISK maxloss 250.5 maxpos 10 FOR 2h ON SPY WHEN last > 1: FLAT; CANCEL")
    assert plan == Plan(
        "a",
        (Rule(Compare(">", Series("last"), Number(1)), (Flat(), Cancel())),),
        "SPY",
        For(Duration(2, "h")),
        Risk(maxpos=10, maxloss=250.5),
    )


def test_standdown_reason_escapes() -> None:
    assert parse(r'STANDDOWN "say \"no\" \\ twice"') == StandDown('say "no" \\ twice')
    assert format(StandDown('say "no" \\ twice')) == 'STANDDOWN "say \\"no\\" \\\\ twice"\n'


def test_comments_are_never_cut_short_to_find_tokens() -> None:
    assert parse("PASS # FLAT when x3 (\n# PLAN b WHEN last > 1: FLAT") == Pass()
    assert parse('STANDDOWN "a # is text here"') == StandDown("a # is text here")


def test_parsing_from_several_threads_gives_the_same_asts() -> None:
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    texts = [p.read_text() for p in sorted((Path(__file__).parent.parent / "examples").glob("*.kes"))]
    expected = [parse(t) for t in texts]
    for _ in range(5):  # fresh threads each round: each builds its own parser concurrently
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(parse, texts)) == expected
