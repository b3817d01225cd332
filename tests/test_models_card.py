"""The language card (system prompt) is generated from the language and stays small."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kestrel import lang
from kestrel.frame import DEFAULT_CATALOG
from kestrel.lang import ast
from kestrel.lang.registry import FUNCTIONS, SERIES
from kestrel.models.card import STATEMENT_EXAMPLES, language_card


def test_card_examples_parse_to_their_statement() -> None:
    kinds = {"PLAN": ast.Plan, "VIEW": ast.View, "STANDDOWN": ast.StandDown, "PASS": ast.Pass}
    assert [name for name, _, _ in STATEMENT_EXAMPLES] == ["PLAN", "VIEW", "STANDDOWN", "PASS"]
    for name, _, example in STATEMENT_EXAMPLES:
        assert isinstance(lang.parse(example), kinds[name])
        assert example in language_card()


def test_card_names_every_series_function_and_pane() -> None:
    card = language_card()
    for s in SERIES.values():
        assert f"{s.name}:{s.type}" in card
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


def test_importing_models_imports_no_sdk() -> None:
    code = (
        "import sys, kestrel.models, kestrel.models.card, kestrel.models.adapter, "
        "kestrel.models.providers, kestrel.models.effort, kestrel.models.cost, kestrel.cli.simulate; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'genai_prices')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
