"""resolve_view fail-closed paths, budget truncation, default view, briefing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data.sample import load_sample
from kestrel.frame import (
    DEFAULT_CATALOG,
    Ordinal,
    ResolvedPane,
    ResolvedView,
    ViewError,
    ViewSelection,
    briefing,
    default_view,
    estimate_tokens,
    freeze,
    materialize,
    resolve_view,
)
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.lang.ast import Duration, Ident, Number, PaneArg, PaneRef, Percent, TimeOfDay, View

O1 = Ordinal(1, "10:30", 0)


def _err(view: View | ViewSelection) -> ViewError:
    with pytest.raises(ViewError) as info:
        resolve_view(view, O1)
    assert isinstance(info.value, ValueError)
    return info.value


def _v(*panes: PaneRef, budget: int | None = None) -> View:
    return View("scout", panes, budget)


def test_resolves_positional_named_and_defaults() -> None:
    r = resolve_view(
        _v(PaneRef("quote"), PaneRef("bars", (PaneArg(Duration(15, "m")),)),
           PaneRef("tape", (PaneArg(Number(3), "n"),)), budget=600),
        O1,
    )
    assert r == ResolvedView(
        "scout",
        (ResolvedPane("quote"), ResolvedPane("bars", (("tf", 900), ("n", 12))), ResolvedPane("tape", (("n", 3),))),
        600,
    )
    assert r.panes[1].call() == "bars(tf=15m, n=12)"
    assert resolve_view(ViewSelection(("levels",)), O1).budget == DEFAULT_CATALOG.default_budget
    daily = resolve_view(_v(PaneRef("bars", (PaneArg(Duration(1, "d")), PaneArg(Number(5))))), O1)
    assert daily.panes[0].args == (("tf", 86_400), ("n", 5))


def test_unknown_pane_with_did_you_mean() -> None:
    e = _err(_v(PaneRef("qoute")))
    assert e.problems[0].startswith("unknown pane 'qoute' (did you mean 'quote'?); panes: quote, bars(tf=5m, n=12)")
    assert "did you mean" not in _err(_v(PaneRef("zzzzzz"))).problems[0]


@pytest.mark.parametrize("kernel", ["clock", "ordinal", "cutoff", "budget", "grammar"])
def test_reserved_kernel_ids_fail(kernel: str) -> None:
    e = _err(_v(PaneRef("quote"), PaneRef(kernel)))
    assert e.problems == (f"{kernel!r} is a reserved kernel pane, already in every briefing; remove it from the VIEW",)


def test_unknown_argument() -> None:
    e = _err(_v(PaneRef("bars", (PaneArg(Number(5), "count"),))))
    assert e.problems == ("bars: unknown argument 'count'; it takes symbol, tf, n: bars(tf=5m, n=12)",)
    e = _err(_v(PaneRef("bars", (PaneArg(Number(5), "tff"),))))
    assert e.problems == ("bars: unknown argument 'tff' (did you mean 'tf'?); it takes symbol, tf, n: bars(tf=5m, n=12)",)
    # below kestrel.lang.suggest.CUTOFF (0.7; 'nn' vs 'n' is 0.67) the list of arguments says it
    e = _err(_v(PaneRef("tape", (PaneArg(Number(5), "nn"),))))
    assert e.problems == ("tape: unknown argument 'nn'; it takes symbol, n: tape(n=10)",)
    e = _err(_v(PaneRef("quote", (PaneArg(Number(1), "x"),))))
    assert e.problems == ("quote: unknown argument 'x'; it takes symbol: quote",)


def test_ill_typed_arguments() -> None:
    e = _err(_v(PaneRef("bars", (PaneArg(Number(5)),))))
    assert e.problems == ("bars: argument tf expects a duration like 5m, got 5",)
    e = _err(_v(PaneRef("tape", (PaneArg(Duration(5, "m")),))))
    assert e.problems == ("tape: argument n expects a whole number like 10, got 5m",)
    e = _err(_v(PaneRef("tape", (PaneArg(Number(2.5)),))))
    assert e.problems == ("tape: argument n expects a whole number like 10, got 2.5",)
    e = _err(_v(PaneRef("tape", (PaneArg(Percent(5)),))))
    assert e.problems == ("tape: argument n expects a whole number like 10, got 5%",)
    e = _err(_v(PaneRef("levels", (PaneArg(TimeOfDay(10, 0)),))))
    assert e.problems == ("levels: argument or expects a duration like 30m, got 10:00",)
    e = _err(_v(PaneRef("tape", (PaneArg(Ident("x")), PaneArg(Ident("all"))))))
    assert e.problems == ("tape: argument n expects a whole number like 10, got all",)
    for bad in (float("inf"), float("nan")):  # ASTs built in code, not by the parser
        e = _err(_v(PaneRef("tape", (PaneArg(Number(bad)),))))
        assert e.problems == (f"tape: argument n expects a whole number like 10, got {bad:g}",)


def test_out_of_range_arguments() -> None:
    e = _err(_v(PaneRef("tape", (PaneArg(Number(0)),))))
    assert e.problems == ("tape: argument n out of range: got 0, allowed 1..50",)
    e = _err(_v(PaneRef("bars", (PaneArg(Duration(30, "s")),))))
    assert e.problems == ("bars: argument tf out of range: got 30s, allowed 1m..1d, a multiple of 1m",)
    e = _err(_v(PaneRef("bars", (PaneArg(Duration(90, "s")),))))
    assert e.problems == ("bars: argument tf out of range: got 90s, allowed 1m..1d, a multiple of 1m",)
    e = _err(_v(PaneRef("bars", (PaneArg(Duration(2, "d")),))))
    assert e.problems == ("bars: argument tf: only 1d is allowed for days, got 2d",)
    e = _err(_v(PaneRef("bars", (PaneArg(Duration(5, "m")), PaneArg(Number(101))))))
    assert e.problems == ("bars: argument n out of range: got 101, allowed 1..100",)
    # values print as the VIEW writes them: no exponent form, seconds of a time kept
    e = _err(_v(PaneRef("tape", (PaneArg(Number(1234567)),))))
    assert e.problems == ("tape: argument n out of range: got 1234567, allowed 1..50",)
    e = _err(_v(PaneRef("tape", (PaneArg(Number(0.00001)),))))
    assert e.problems == ("tape: argument n expects a whole number like 10, got 0.00001",)
    e = _err(_v(PaneRef("levels", (PaneArg(TimeOfDay(10, 0, 30)),))))
    assert e.problems == ("levels: argument or expects a duration like 30m, got 10:00:30",)


def test_argument_shape_errors() -> None:
    e = _err(_v(PaneRef("tape", (PaneArg(Number(3)), PaneArg(Number(4))))))
    assert e.problems == ("tape: too many arguments (2), it takes 1: tape(n=10)",)
    e = _err(_v(PaneRef("tape", (PaneArg(Number(3)), PaneArg(Number(4), "n")))))
    assert e.problems == ("tape: argument n given twice",)
    e = _err(_v(PaneRef("bars", (PaneArg(Number(3), "n"), PaneArg(Duration(5, "m"))))))
    assert e.problems == ("bars: positional argument 5m after a named one; write positional arguments first: bars(tf=5m, n=12)",)


def test_duplicate_pane() -> None:
    e = _err(_v(PaneRef("quote"), PaneRef("tape"), PaneRef("quote")))
    assert e.problems == ("duplicate pane 'quote': request each pane once",)


@pytest.mark.parametrize("budget", [0, 63, 4001, -5])
def test_budget_out_of_range(budget: int) -> None:
    e = _err(_v(PaneRef("quote"), budget=budget))
    assert e.problems == (f"BUDGET {budget} out of range: use 64..4000 tokens (default 900)",)


def test_empty_view_and_all_problems_listed() -> None:
    assert _err(ViewSelection(())).problems[0].startswith("no panes requested; choose from: quote, bars")
    e = _err(_v(PaneRef("qoute"), PaneRef("clock"), PaneRef("tape", (PaneArg(Number(99)),)), budget=1))
    assert len(e.problems) == 4
    assert str(e).splitlines()[0] == "invalid VIEW scout: 4 problems"
    assert str(e).splitlines()[1].startswith("- unknown pane 'qoute'")


def _snap() -> FrozenSnapshot:
    d = load_sample()
    return freeze(d, d.sessions[-1].wall_clock_ns(10, 30))


def test_budget_truncation_is_explicit_and_within_budget() -> None:
    s = _snap()
    big = resolve_view(ViewSelection(("quote", PaneRef("bars", (PaneArg(Duration(1, "m")), PaneArg(Number(60)))),
                                      "levels", "stats"), budget=200), O1)
    text = materialize(big, s)
    assert estimate_tokens(text) <= 200
    last = text.splitlines()[-1]
    assert last.startswith("[budget 200 reached: bars cut to ")
    assert last.endswith("/62 lines, oldest rows dropped; omitted levels, stats]")
    assert text.startswith(materialize(resolve_view(ViewSelection(("quote",)), O1), s) + "\n\nBARS 1m last 60")
    # the cut keeps the bars' header and their newest rows, the last of them the bar before the cutoff
    whole = materialize(resolve_view(ViewSelection((PaneRef("bars", (PaneArg(Duration(1, "m")), PaneArg(Number(60)))),),
                                                   budget=4000), O1), s).split("\n")
    kept = text.rsplit("\n", 1)[0].split("\n\n")[1].split("\n")
    k = int(last.split("bars cut to ")[1].split("/")[0])
    assert len(kept) == k and kept[:2] == whole[:2] and kept[2:] == whole[len(whole) - (k - 2):]
    assert kept[-1].startswith("04-15 10:24 ")
    # a view that fits has no marker
    small = resolve_view(ViewSelection(("quote", "levels"), budget=4000), O1)
    assert "[budget" not in materialize(small, s)


def test_budget_too_small_for_first_pane_omits_it_explicitly() -> None:
    s = _snap()
    r = ResolvedView("tiny", (ResolvedPane("bars", (("tf", 60), ("n", 100))), ResolvedPane("tape", (("n", 50),))), 64)
    text = materialize(r, s)
    assert estimate_tokens(text) <= 64
    assert text.splitlines()[-1].startswith("[budget 64 reached: ")
    assert "omitted tape" in text


def test_materialize_and_briefing_deterministic() -> None:
    s = _snap()
    v = default_view(O1)
    assert materialize(v, s) == materialize(v, s)
    b = briefing(s, O1, extra_kernel={"budget": "tokens 8000 views 3"})
    assert b == briefing(_snap(), O1, extra_kernel={"budget": "tokens 8000 views 3"})
    lines = b.splitlines()
    assert lines[0] == ("CLOCK SAMPLE #1 10:30 cutoff 10:25:00 session 2024-04-15 09:30-16:00 America/New_York; "
                        "now 10:30, close in 5h30m")
    assert lines[1:5] == [
        "RULES SAMPLE tick 0.01 mult 1 USD lot 1",
        "bounds maxpos 1000 maxloss 1000 maxorders 50 session_maxloss none",
        "friction none; eod flatten",
        "since last turn: none",
    ]
    assert lines[5] == "BUDGET tokens 8000 views 3"
    assert lines[6].startswith("REPLY ")
    assert "\n\nVIEW default budget 900\nQUOTE SAMPLE 10:24:59\n" in b


def test_default_view_panes() -> None:
    at_open = default_view(Ordinal(0, "OPEN", 0))
    later = default_view(O1)
    assert [p.name for p in later.panes] == ["quote", "levels", "bars", "stats", "tape", "position", "plan"]
    assert at_open.panes[2].args == (("tf", 1800), ("n", 13))
    assert later.panes[2].args == (("tf", 300), ("n", 12))
    s = _snap()
    assert "[budget" not in materialize(later, s)


def test_briefing_accepts_view_ast_and_rejects_bad_kernel_keys() -> None:
    s = _snap()
    b = briefing(s, O1, View("v", (PaneRef("quote"),), 100))
    assert "\n\nVIEW v budget 100\nQUOTE SAMPLE" in b
    with pytest.raises(ViewError):
        briefing(s, O1, View("v", (PaneRef("clock"),)))
    with pytest.raises(ValueError, match="extra_kernel keys must be kernel ids"):
        briefing(s, O1, extra_kernel={"weather": "sunny"})


def test_token_estimator_is_documented_rule() -> None:
    # letters: ceil(len/6); digits: ceil(len/3); other non-space: 1; newline: 1
    assert estimate_tokens("") == 0
    assert estimate_tokens("QUOTE") == 1
    assert estimate_tokens("abcdefg") == 2
    assert estimate_tokens("182.40") == 3  # 182 . 40
    assert estimate_tokens("1234567") == 3
    assert estimate_tokens("a b\nc") == 4


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=64, max_value=4000), st.permutations(["quote", "bars", "levels", "stats", "tape"]))
def test_budget_always_respected_and_cut_announced(budget: int, order: list[str]) -> None:
    s = _snap()
    r = resolve_view(ViewSelection(tuple(order), budget=budget), O1)
    text = materialize(r, s)
    panes = [DEFAULT_CATALOG.get(p.name).builder(s, dict(p.args)) for p in r.panes]  # type: ignore[union-attr]
    whole = "\n\n".join(panes)
    assert estimate_tokens(text) <= budget
    if estimate_tokens(whole) <= budget:
        assert text == whole
        return
    marker = text.splitlines()[-1]
    assert marker.startswith(f"[budget {budget} reached: ")
    kept = text.rsplit("\n", 1)[0].split("\n\n") if "\n" in text else []
    assert kept[:-1] == panes[: len(kept) - 1]  # the panes before the cut are whole, in order
    if not kept or kept[-1] == panes[len(kept) - 1]:
        return
    cut, full = kept[-1].split("\n"), panes[len(kept) - 1].split("\n")
    assert f"{r.panes[len(kept) - 1].name} cut to {len(cut)}/{len(full)} lines" in marker
    if r.panes[len(kept) - 1].name in ("bars", "tape"):  # time order: its header, then its newest rows
        assert cut[:2] == full[:2] and cut[2:] == full[len(full) - (len(cut) - 2):]
        assert (", oldest rows dropped" in marker) == (len(cut) > 2)  # a header alone dropped every row
    else:  # its first lines
        assert cut == full[: len(cut)] and "oldest" not in marker
