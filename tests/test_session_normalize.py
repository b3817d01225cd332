"""The normalization step before parsing: what it strips, what it refuses to guess, and that a
statement comes through whatever a model wraps it in (hypothesis over the language's own
documents)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.lang import format, parse
from kestrel.lang.ast import Statement
from kestrel.session.normalize import normalize_reply
from lang_strategies import statements

PLAN = "PLAN orb\nWHEN last > high(30m): BUY 100 MKT STOP -0.6%"

valid_statements = statements().filter(lambda s: _parses(format(s)))

# prose a model writes around its answer: sentences that start with no statement keyword
prose_lines = st.sampled_from([
    "Here is my plan:", "Sure! Based on the briefing:", "I'll trade the opening range breakout.",
    "This keeps the risk small.", "Note: the spread is tight today.", "Let me know if you want changes.",
    "**Answer**", "---", "The stop sits below the range low.",
])
fences = st.sampled_from(["```", "```kestrel", "```text", "~~~"])
thoughts = st.text(st.characters(exclude_characters="<>", exclude_categories=["Cs"]), max_size=80)


def _parses(text: str) -> bool:
    try:
        parse(text)
    except Exception:
        return False
    return True


def _same(text: str, stmt: Statement) -> bool:
    return parse(text) == parse(format(stmt))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(valid_statements)
def test_a_statement_as_the_card_asks_is_left_exactly_as_written(stmt: Statement) -> None:
    text = format(stmt)
    assert normalize_reply(text) == normalize_reply(text) and normalize_reply(text).text == text
    assert normalize_reply(text).changes == () and normalize_reply(text).error is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(valid_statements, st.lists(prose_lines, max_size=3), st.lists(prose_lines, max_size=3),
       st.one_of(st.none(), fences), st.one_of(st.none(), thoughts))
def test_a_statement_comes_through_whatever_a_model_wraps_it_in(
    stmt: Statement, before: list[str], after: list[str], fence: str | None, thought: str | None
) -> None:
    body = format(stmt).rstrip("\n")
    if fence is not None:
        body = f"{fence}\n{body}\n{fence[:3]}"
    reply = "\n".join([*before, "", body, "", *after])
    if thought is not None:
        reply = f"<think>{thought}</think>\n{reply}"
    out = normalize_reply(reply)
    assert out.error is None and _same(out.text, stmt)
    wrapped = bool(before or after or fence or thought is not None)
    assert bool(out.changes) == wrapped
    # line numbers are the reply's own: the statement starts where the model wrote it
    first = next(i for i, line in enumerate(out.text.split("\n")) if line.strip())
    assert reply.split("\n")[first].strip() == out.text.split("\n")[first].strip()


def test_what_is_stripped_is_said() -> None:
    assert normalize_reply(f"```kestrel\n{PLAN}\n```").changes == ("markdown fence ```kestrel stripped",)
    assert normalize_reply(f"<think>x</think>{PLAN}").changes == ("<think> block stripped (16 chars)",)
    assert normalize_reply(f"<thinking>\nhmm\n</thinking>\n{PLAN}").changes == (
        "<thinking> block stripped (26 chars)",)
    assert normalize_reply(f"the template opened it\n</think>\n{PLAN}").changes == (
        "<think> block stripped (31 chars)",)
    cut = normalize_reply(f"<think>still weighing {PLAN}")
    assert cut.text == "" and cut.unclosed_think and cut.changes[0].endswith("it was never closed")
    assert normalize_reply("`PASS`").changes == ("backticks stripped",)
    assert normalize_reply(f"Sure:\n{PLAN}\n\nDone.").changes == (
        "prose around the statement stripped (1 line before and 1 line after)",)
    assert normalize_reply(f"```\n{PLAN}").changes == ("markdown fence ``` stripped (never closed)",)
    # comments and blank lines are the language's own: nothing to strip
    assert normalize_reply(f"# breakout\n\n{PLAN}\n# end\n").changes == ()


def test_anything_ambiguous_is_not_guessed_at() -> None:
    two = normalize_reply("VIEW v: quote\n\nPLAN orb\nWHEN last > 1: FLAT")
    assert two.error == ("your reply holds 2 statements (VIEW on line 1, PLAN on line 3): send exactly one "
                         "statement, alone, with no prose around it")
    inside = normalize_reply("PLAN orb\nWHEN last > 1: BUY 1 MKT\nand then\nWHEN last < 1: FLAT")
    assert inside.error is not None and inside.error.startswith(
        "your reply has prose inside the PLAN (line 3, before line 4)")
    blocks = normalize_reply("```\nPASS\n```\n\n```\nSTANDDOWN\n```")
    assert blocks.error is not None and "2 code blocks that each hold a statement" in blocks.error
    # a code block holding no statement beside one that does: the one that does
    assert normalize_reply("```\nmy notes\n```\n```kestrel\nPASS\n```").text.strip() == "PASS"


def test_a_statement_with_a_type_error_still_has_its_prose_stripped_for_the_parser() -> None:
    out = normalize_reply("Here:\nPLAN orb\nWHEN last > 30m: BUY 1 MKT STOP -1%\nThanks.")
    assert out.error is None and out.text.split("\n")[1:] == ["PLAN orb", "WHEN last > 30m: BUY 1 MKT STOP -1%"]
    # a syntax error: only the prose before the one keyword line goes (it cannot be the statement's)
    broken = normalize_reply("Here:\nPLAN orb\nWHEN last > 1 BUY 1 MKT")
    assert broken.changes == ("prose before the statement stripped (1 line)",)
    assert broken.text == "\nPLAN orb\nWHEN last > 1 BUY 1 MKT"
