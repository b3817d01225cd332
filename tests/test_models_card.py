"""The language card (system prompt) is generated from the language and stays small."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kestrel import lang
from kestrel.frame import DEFAULT_CATALOG
from kestrel.lang import ast
from kestrel.lang.registry import FUNCTIONS, SERIES
from kestrel.models.card import STATEMENT_EXAMPLES, language_card
from kestrel.models.grammar import grammar_lines, grammar_text, terminal_forms


def test_card_examples_parse_to_their_statement() -> None:
    kinds = {"PLAN": ast.Plan, "VIEW": ast.View, "STANDDOWN": ast.StandDown, "PASS": ast.Pass}
    assert [name for name, _, _ in STATEMENT_EXAMPLES] == ["PLAN", "VIEW", "STANDDOWN", "PASS"]
    for name, _, example in STATEMENT_EXAMPLES:
        node = lang.parse(example)
        assert isinstance(node, kinds[name])
        assert lang.check(node) == []
        assert example in language_card()


def grammar_section(card: str) -> list[str]:
    return card.split("# Grammar", 1)[1].split("\n\n", 1)[0].splitlines()[1:]


def test_card_grammar_is_the_parsers_grammar() -> None:
    """Every rule of kestrel.lark (as lark compiles it) has its line in the card, and every
    terminal an author can write shows there (keywords in their upper-case form)."""
    from lark import Lark

    text = grammar_text()
    parser = Lark(text, parser="lalr", lexer="basic")
    card = language_card()
    section = "\n".join(grammar_section(card))
    heads = {line.split(":", 1)[0] for line in grammar_section(card) if ":" in line}
    names = {str(r.origin.name) for r in parser.rules}
    rules = {n.strip("_") for n in names if not n.startswith("__") and n != "start"}  # __: lark's helpers
    assert rules <= heads, rules - heads
    expected = {
        "PLAN", "VIEW", "STANDDOWN", "PASS", "ON", "UNTIL", "FOR", "RISK", "MAXPOS", "MAXLOSS",
        "MAXORDERS", "BUDGET", "WHEN", "BUY", "SELL", "FLAT", "CANCEL", "MKT", "MARKET", "LMT", "LIMIT",
        "STP", "STOP", "TARGET", "TRAIL", "TTL", "OR", "AND", "NOT", "CROSSES", "ABOVE", "BELOW",
    }
    words = set(re.findall(r"\b[A-Z]{2,}\b", section))
    assert expected <= words, expected - words
    ignored = set(parser.ignore_tokens)
    for term in parser.terminals:
        if term.name in ignored:
            continue
        for form in terminal_forms(text)[term.name]:
            assert form in section, (term.name, form)
    assert "on: ON SYMBOL" in section and "header: on | until | for | risk" in section


def test_a_new_terminal_reaches_the_card_or_fails_loudly() -> None:
    text = grammar_text()
    grown = text.replace("_header: on | until | for_ | risk", "_header: on | until | for_ | risk | tag") + (
        '\ntag: _TAG NAME\n_TAG.3: /tag\\b/i\n'
    )
    assert "tag: TAG name" in grammar_lines(grown)
    assert "header: on | until | for | risk | tag" in grammar_lines(grown)
    odd = grown.replace("tag: _TAG NAME", "tag: _TAG NAME CODE") + "\nCODE: /[a-f0-9]{8}/\n"
    with pytest.raises(ValueError, match="CODE"):
        grammar_lines(odd)


def test_every_line_of_the_card_that_is_a_statement_parses_and_checks() -> None:
    """The statement examples, and the card's statement-shaped lines outside the grammar."""
    card = language_card()
    body = card.split("# Statements", 1)[1].split("# Grammar", 1)[0]
    blocks = [b.split("\n", 1)[1] for b in body.strip().split("\n\n")]
    assert len(blocks) == 4
    for block in blocks:
        assert lang.check(lang.parse(block)) == []


def test_card_names_every_series_function_and_pane() -> None:
    card = language_card()
    line = next(x for x in card.splitlines() if x.startswith("Series: "))
    typed = {name: kind for group in line.removeprefix("Series: ").split("; ")
             for kind, names in [group.split(": ")] for name in names.split()}
    assert typed == {s.name: s.type for s in SERIES.values()}  # each series under its type, once
    for f in FUNCTIONS.values():
        assert f.signature in card
    for p in DEFAULT_CATALOG:
        assert p.signature() in card
    assert "exactly one statement" in card
    assert "BUDGET" in card


def test_card_is_stable_and_within_token_limit() -> None:
    quicktok = pytest.importorskip("quicktok")
    card = language_card()
    assert card == language_card()
    assert len(quicktok.get_encoding("o200k_base").encode(card)) <= 1500


def test_card_states_how_every_bound_of_the_rules_pane_binds_and_how_to_re_arm() -> None:
    import msgspec

    from kestrel.market.terms import Bounds

    card = language_card()
    rules = card[card.index("# Rules"):card.index("# Loop")]
    for bound in (f.name for f in msgspec.structs.fields(Bounds)):
        assert bound in rules, bound  # each bound the RULES pane shows is explained
    assert "RISK only tightens the operator's bounds" in card
    assert "disarms and flattens" in rules and "ends the session" in rules
    assert "an unchanged PLAN keeps the incumbent; rename it to re-arm" in rules


def test_importing_models_imports_no_sdk() -> None:
    code = (
        "import sys, kestrel.models, kestrel.models.card, kestrel.models.adapter, "
        "kestrel.models.wires, kestrel.models.effort, kestrel.models.cost, kestrel.cli.simulate; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'genai_prices')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
