"""The reply grammar as the language card shows it, generated from `kestrel/lang/kestrel.lark`
(the file the parser is built from), so the card cannot drift from what the runtime accepts.

- terminals come from lark's public API (`Lark(...).terminals`, `ignore_tokens`): a keyword
  or punctuation terminal shows as the words or literals it matches (keywords upper case: they
  are case-insensitive); a terminal that matches open-ended text (a name, a number, a time)
  shows as its placeholder from `PLACEHOLDERS`, and a terminal with neither fails the card's
  generation (the tests catch a new terminal before a model ever sees a gap);
- rules are read from the grammar text in file order and rendered as EBNF, one line per rule,
  with the grammar's own structure (`?`, `*`, `+`, `[...]`, groups, alternatives); tree-only
  details (`?` inlining, `-> alias`, leading and trailing `_`) are dropped; `start` is not
  shown (a reply is exactly one statement, the card's reply rule says so).
Pure: reads a packaged file, no SDK.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PLACEHOLDERS: dict[str, str] = {
    "NAME": "name",
    "NUMBER": "n",
    "PERCENT": "n%",
    "DURATION": "dur",
    "TIME": "hh:mm",
    "SYMBOL": "SYMBOL",
    "XREAD": "SYMBOL.name",
    "STRING": '"text"',
    "REPEAT": "xN",
    "CASH": "$n",
}
"""Open-ended terminals and how the card writes them (explained under the grammar)."""

HIDDEN_RULES = ("start",)

_METACHARS = set("[]{}()*+?.^$|")
_RULE = re.compile(r"^(\??)([a-z_][a-z0-9_]*)\s*:\s*(.*)$")
_TOKEN = re.compile(r'->\s*[a-z_][a-z0-9_]*|"[^"]*"|[A-Za-z_][A-Za-z0-9_]*|[()\[\]|*+?]')


def grammar_text() -> str:
    """The language's grammar file, as packaged with `kestrel.lang`."""
    return resources.files("kestrel.lang").joinpath("kestrel.lark").read_text("utf-8")


def _literals(value: str) -> list[str] | None:
    """The literal alternatives a regex matches (`(buy|sell)\\b`, `(?:<=|>=)`, `=(?!=)`), else
    None. A trailing word boundary or negative lookahead only limits where the text ends."""
    v = re.sub(r"\(\?!(?:[^()\\]|\\.)*\)$", "", value)
    v = v[:-2] if v.endswith(r"\b") else v
    if v.startswith("(?:") and v.endswith(")"):
        v = v[3:-1]
    elif v.startswith("(") and v.endswith(")"):
        v = v[1:-1]
    out = []
    for alt in v.split("|"):
        if not alt or _METACHARS & set(re.sub(r"\\.", "", alt)):
            return None
        out.append(re.sub(r"\\(.)", r"\1", alt))
    return out


@cache
def terminal_forms(text: str) -> dict[str, tuple[str, ...]]:
    """Each terminal of grammar `text` an author can write -> the forms the card shows for it
    (not the ignored whitespace and comments). Raises ValueError for a terminal with no form."""
    from lark import Lark

    parser = Lark(text, parser="lalr", lexer="basic")
    ignored = set(parser.ignore_tokens)
    forms: dict[str, tuple[str, ...]] = {}
    for term in parser.terminals:
        if term.name in ignored:
            continue
        pattern = term.pattern
        if term.name in PLACEHOLDERS:
            forms[term.name] = (PLACEHOLDERS[term.name],)
            continue
        lits = [pattern.value] if pattern.type == "str" else _literals(pattern.value)
        if lits is None:
            raise ValueError(
                f"kestrel.lark terminal {term.name} matches open-ended text: give it a placeholder "
                "in kestrel.models.grammar.PLACEHOLDERS"
            )
        words = all(re.fullmatch(r"[A-Za-z]+", w) for w in lits)
        forms[term.name] = tuple(w.upper() if words and "i" in pattern.flags else
                                 (w if words else f'"{w}"') for w in lits)
    return forms


def _rules(text: str) -> list[tuple[str, list[str]]]:
    """(rule name, its alternatives' source text) in file order."""
    rules: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if not line.strip():
            continue
        m = _RULE.match(line)
        if m:
            rules.append((m.group(2), [m.group(3)]))
        elif line.lstrip().startswith("|") and rules and raw[:1].isspace():
            rules[-1][1].append(line.lstrip()[1:])
    return rules


def _display(name: str) -> str:
    return name.strip("_")


def _render(expansion: str, forms: dict[str, tuple[str, ...]]) -> str:
    tokens = [t for t in _TOKEN.findall(expansion) if not t.startswith("->")]
    items = sum(1 for t in tokens if t not in "()[]|*+?")
    out: list[str] = []
    for tok in tokens:
        if tok in forms:
            alts = forms[tok]
            word = "|".join(alts)
            out.append(f"({word})" if len(alts) > 1 and items > 1 else word)
        elif re.fullmatch(r"[A-Z_][A-Z0-9_]*", tok):
            raise ValueError(f"kestrel.lark rule uses terminal {tok}, which has no form in the card")
        else:
            out.append(_display(tok) if tok[0].isalpha() or tok[0] == "_" else tok)
    text = " ".join(out)
    text = re.sub(r"\s+([)\]*+?])", r"\1", text)
    return re.sub(r"([(\[])\s+", r"\1", text)


@cache
def grammar_lines(text: str | None = None) -> tuple[str, ...]:
    """The rules of grammar `text` (default: the language's), one `name: alt | alt` line each
    (see the module docstring)."""
    text = grammar_text() if text is None else text
    forms = terminal_forms(text)
    lines = []
    for name, alternatives in _rules(text):
        if name in HIDDEN_RULES:
            continue
        rendered: list[str] = []
        for alt in alternatives:
            r = _render(alt, forms)
            if r not in rendered:
                rendered.append(r)
        lines.append(f"{_display(name)}: {' | '.join(rendered)}")
    return tuple(lines)


__all__ = ["HIDDEN_RULES", "PLACEHOLDERS", "grammar_lines", "grammar_text", "terminal_forms"]
