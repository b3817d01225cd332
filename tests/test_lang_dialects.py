"""The grammar exported for constrained decoding (`kestrel.lang.dialects`), proved against
the decoders' own library and Kestrel's parser:

- each dialect compiles in LLGuidance (the Lark subset directly, GBNF and EBNF through its
  GBNF reader) and, where it installs, in xgrammar; GBNF and EBNF also read structurally;
- every example and a hand corpus, in canonical form, are accepted under every dialect: the
  Lark subset by LLGuidance's matcher, GBNF and EBNF character by character (`Recognizer`:
  LLGuidance's Earley parser over one-character terminals, as llama.cpp and xgrammar read
  them; LLGuidance's own GBNF reader merges rules into greedy lexemes, which is not how
  llama.cpp matches);
- thousands of documents sampled from the exported GBNF all pass Kestrel's syntax stage, and
  the other dialects accept them too; the share that also type-checks is printed;
- every document Kestrel rejects as a syntax error (mutations, token soups, a hand corpus)
  is rejected under every dialect.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from grammar_tools import BnfError, Matcher, Recognizer, Sampler, read_bnf, syntax_stage
from kestrel.lang import LangError, Module, Statement, format, parse
from kestrel.lang.dialects import DIALECTS, REPEAT_BOUND, Dialect, NotTranslatable, derive, export
from kestrel.lang.grammar import GRAMMAR
from lang_strategies import CORPUS, documents, mutated, token_soups

pytest.importorskip("llguidance")

ROOT = Path(__file__).resolve().parent.parent
FMT = {"llguidance": "lark", "gbnf": "gbnf", "ebnf": "ebnf"}
SAMPLES = 2000


class Acceptor:
    """Whether a text is in the exported grammar of one dialect."""

    def __init__(self, dialect: Dialect, module: bool) -> None:
        text = export(dialect, module=module)
        self.run = Matcher(text) if dialect == "llguidance" else Recognizer(read_bnf(text, dialect))

    def accepts(self, text: str) -> bool:
        return self.run.accepts(text)


_ACCEPTORS: dict[tuple[Dialect, bool], Acceptor] = {}


def acceptor(dialect: Dialect, module: bool = False) -> Acceptor:
    if (dialect, module) not in _ACCEPTORS:
        _ACCEPTORS[dialect, module] = Acceptor(dialect, module)
    return _ACCEPTORS[dialect, module]


def accepted_by(text: str, module: bool = False) -> dict[str, bool]:
    return {d: acceptor(d, module).accepts(text) for d in DIALECTS}


def statements_of(doc: Module | Statement) -> tuple[Statement, ...]:
    return doc.statements if isinstance(doc, Module) else (doc,)


# ---- compiling


@pytest.mark.parametrize("module", [False, True], ids=["reply", "module"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_compiles_in_llguidance_without_warnings(dialect: Dialect, module: bool) -> None:
    Matcher(export(dialect, module=module), FMT[dialect])  # raises on an error or a warning


def test_the_kestrel_grammar_itself_is_outside_the_llguidance_subset() -> None:
    """The reason for the export: LLGuidance refuses kestrel.lark (terminal priorities)."""
    with pytest.raises(ValueError, match="priorit"):
        Matcher(GRAMMAR)


@pytest.mark.parametrize("dialect", ["gbnf", "ebnf"])
def test_gbnf_and_ebnf_read_structurally(dialect: Dialect) -> None:
    for module in (False, True):
        rules = read_bnf(export(dialect, module=module), dialect)
        assert "root" in rules and len(rules) > 20
        names = set(rules)
        if dialect == "gbnf":  # llama.cpp's rule names: letters, digits and `-`
            assert all(re.fullmatch(r"[A-Za-z0-9-]+", n) for n in names)


def test_the_bnf_reader_refuses_what_is_not_gbnf() -> None:
    good = export("gbnf")
    for broken in (good.replace("root ::=", "root ="), good + "x ::= undefined-rule\n",
                   good.replace('"PLAN"', '"PLAN'), good.replace("[0-9]", "[9-0]")):
        with pytest.raises(BnfError):
            read_bnf(broken, "gbnf")


def test_ebnf_compiles_in_xgrammar_when_installed() -> None:
    xgr = pytest.importorskip("xgrammar")
    for dialect in ("ebnf", "gbnf"):  # xgrammar reads GBNF as a subset of its EBNF
        for module in (False, True):
            grammar = xgr.Grammar.from_ebnf(export(dialect, module=module))
            testing = getattr(xgr, "testing", None)
            check = getattr(testing, "_is_grammar_accept_string", None)
            if check is not None:
                for path in CORPUS:
                    doc = parse(path.read_text())
                    text = format(doc) if module else format(statements_of(doc)[0])
                    assert check(grammar, text), path.name


# ---- canonical documents are accepted

HAND_CORPUS = [
    "PASS\n",
    "STANDDOWN\n",
    'STANDDOWN "spread too wide: \\"2c\\" on a \\\\ day"\n',
    "VIEW deep: quote, bars(1m,n=60), stats, tape(20), position, plan BUDGET 1500\n",
    "VIEW v: levels(-3,x=-0.5%,tf=5m,at=09:30:15,k=abc), quote\n",
    "PLAN when ON BRK.B UNTIL 09:30:15 RISK maxpos 5 maxloss 12.5 maxorders 3\n"
    "WHEN last > high(30m) AND NOT time < 10:00: BUY 5 LMT ask+0.02 STOP -0.6% TARGET +1.2% TRAIL 0.5% TTL 20m x3\n",
    "PLAN plan FOR 90m\nWHEN pos > 0 OR upnl < -50: FLAT; CANCEL\n",
    "PLAN x3\nWHEN 1- -5 > -(5)*2 AND last CROSSES ABOVE sma(last,20,5m): SELL 1 STP bid-0.05 STOP @101.5\n",
    "PLAN t\nWHEN time >= 15:30: FLAT\nWHEN chg(5m) < -1.5% AND (spread > 0.05 OR vol > 200000): CANCEL x100\n",
    "PLAN notice\nWHEN -last < -(100) AND ema(mid,9) CROSSES BELOW vwap: SELL 100 MKT STOP +0.5% TARGET -1%\n",
]


@pytest.mark.parametrize("text", HAND_CORPUS, ids=lambda t: t.split("\n")[0][:40])
def test_hand_corpus_is_canonical_and_accepted_by_every_dialect(text: str) -> None:
    assert format(parse(text)) == text  # the corpus itself is valid and canonical
    assert accepted_by(text) == dict.fromkeys(DIALECTS, True)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_example_in_canonical_form_is_accepted(path: Path) -> None:
    doc = parse(path.read_text())
    text = format(doc)
    assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, True)
    for s in statements_of(doc):  # each statement alone is a reply
        assert accepted_by(format(s)) == dict.fromkeys(DIALECTS, True)


def _language_test_documents() -> list[str]:
    """Every string in the other language tests' source that Kestrel parses, in canonical
    form (read with `ast`, not imported)."""
    import ast

    out: set[str] = set()
    for path in sorted((ROOT / "tests").glob("test_lang_*.py")):
        if path.name == Path(__file__).name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                try:
                    out.add(format(parse(node.value)))
                except LangError:
                    pass
    return sorted(t for t in out if not re.search(r"\d{%d,}" % (REPEAT_BOUND + 1), t))


def test_every_valid_document_of_the_language_tests_is_accepted_in_canonical_form() -> None:
    docs = _language_test_documents()
    assert len(docs) >= 20  # the harvest finds the other tests' documents
    for text in docs:
        assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, True), text
        if "\n\n" not in text:  # one statement: a reply
            assert accepted_by(text) == dict.fromkeys(DIALECTS, True), text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_documents_in_canonical_form_are_accepted(doc: Module | Statement) -> None:
    text = format(doc)
    # the export bounds a literal's digit runs; hypothesis floats reach subnormals' 300 digits
    assume(not re.search(r"\d{%d,}" % (REPEAT_BOUND + 1), text))
    assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, True)
    if not isinstance(doc, Module):
        assert accepted_by(text) == dict.fromkeys(DIALECTS, True)


OUTSIDE = [
    "PLAN a  WHEN last > 1: FLAT\n",  # two spaces
    "PLAN a\tWHEN last > 1: FLAT\n",  # a tab
    "# a comment\nPASS\n",
    "PASS\n\n",  # two newlines after the statement
    "PASS\n\nPASS\n",  # two statements in a reply
    "PLAN a\nWHEN last > 1: BUY -5 MKT\n",  # `-5` after a keyword: the gap is kept
    "PLAN not\nWHEN last > 1: FLAT\n",  # a name spelt like a keyword some state takes with a name
    "PLAN a\nWHEN last > 1.0000000000000001: FLAT\n",  # a digit run past the bound
]


@pytest.mark.parametrize("text", OUTSIDE, ids=range(len(OUTSIDE)))
def test_valid_text_outside_the_canonical_subset_is_refused(text: str) -> None:
    """The export may refuse what Kestrel reads: these all pass the syntax stage."""
    assert syntax_stage(text) is None
    assert accepted_by(text) == dict.fromkeys(DIALECTS, False)


def test_the_empty_text_is_refused_as_kestrel_refuses_it() -> None:
    with pytest.raises(LangError, match="no statement"):
        parse("")
    assert accepted_by("") == dict.fromkeys(DIALECTS, False)
    assert accepted_by("", module=True) == dict.fromkeys(DIALECTS, False)


def test_a_module_grammar_takes_statements_separated_by_a_blank_line() -> None:
    text = "PASS\n\nSTANDDOWN\n\nPLAN a\nWHEN last > 1: FLAT\n"
    assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, True)
    assert accepted_by(text) == dict.fromkeys(DIALECTS, False)


# ---- sampled documents parse


def _sample(module: bool, n: int, seed: int) -> tuple[list[str], Sampler]:
    sampler = Sampler(read_bnf(export("gbnf", module=module), "gbnf"))
    rng = random.Random(seed)
    return [sampler.sample(rng) for _ in range(n)], sampler


@pytest.mark.parametrize("module", [False, True], ids=["reply", "module"])
def test_sampled_documents_all_pass_the_syntax_stage(module: bool) -> None:
    docs, sampler = _sample(module, SAMPLES if not module else SAMPLES // 4, seed=27)
    failures = [(d, why) for d in docs if (why := syntax_stage(d)) is not None]
    assert failures == [], failures[:3]
    assert all(v > 0 for v in sampler.hits.values()), {k: v for k, v in sampler.hits.items() if not v}
    typed = 0
    for d in docs:
        try:
            parse(d)
            typed += 1
        except LangError as err:  # a type error, never a syntax one
            assert all(x.code != "syntax" for x in err.diagnostics), (d, err)
    rate = typed / len(docs)
    print(f"sampled {len(docs)} {'modules' if module else 'replies'}: parse rate 1.0, "
          f"type-check rate {rate:.3f}")
    assert 0 < rate < 1  # both kinds occur: the sampler is not stuck on one shape


def test_sampled_documents_are_accepted_by_the_other_dialects() -> None:
    """The three dialects write one language: what GBNF derives, the Lark subset (in
    LLGuidance's greedy lexer) and EBNF accept."""
    docs, _ = _sample(False, SAMPLES // 2, seed=2027)
    for d in docs:
        assert acceptor("llguidance").accepts(d), d
        assert acceptor("ebnf").accepts(d), d


def test_sampling_is_deterministic() -> None:
    assert _sample(False, 50, seed=5)[0] == _sample(False, 50, seed=5)[0]
    assert _sample(False, 50, seed=5)[0] != _sample(False, 50, seed=6)[0]


# ---- syntax errors are refused

SYNTAX_ERRORS = [
    "PLAN",
    "PLAN a\n",
    "PLAN a WHEN",
    "WHEN last > 1: FLAT\n",
    "PLANa WHEN last > 1: FLAT\n",
    "PLAN a\nWHEN last > 1 FLAT\n",
    "PLAN a\nWHEN last > 1: BUY\n",
    "PLAN a\nWHEN (last > 1: FLAT\n",
    "PLAN a\nWHEN last >> 1: FLAT\n",
    "PLAN a\nWHEN last > 1: FLAT x\n",
    "PLAN a\nWHEN last > 1: FLATx3\n",
    "PLAN a\nWHEN last > 99:99:99:99: FLAT\n",
    "VIEW v:\n",
    "VIEW v: quote,\n",
    'STANDDOWN "unterminated\n',
    "PASS x\n",
    "PLAN a\nWHEN not > 1: FLAT\n",
    "PLAN a ON aapl\nWHEN last > 1: FLAT\n",
    "paſs\n",  # the long s: Unicode folds it to s, Kestrel's ASCII lexer does not
    "PLAN a\nWHEN last > 1: BUY 1 MAR\u212aET\n",  # the Kelvin sign: Unicode folds it to k
]


@pytest.mark.parametrize("text", SYNTAX_ERRORS, ids=range(len(SYNTAX_ERRORS)))
def test_hand_corpus_of_syntax_errors_is_refused(text: str) -> None:
    assert syntax_stage(text) is not None  # Kestrel refuses each
    assert accepted_by(text) == dict.fromkeys(DIALECTS, False)
    assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated(), token_soups))
def test_what_kestrel_refuses_as_a_syntax_error_every_dialect_refuses(text: str) -> None:
    if syntax_stage(text) is None:
        return
    assert accepted_by(text, module=True) == dict.fromkeys(DIALECTS, False), text
    assert accepted_by(text) == dict.fromkeys(DIALECTS, False), text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated(), token_soups))
def test_what_a_dialect_accepts_kestrel_parses(text: str) -> None:
    """The same property seen from the other side, on texts that are often valid."""
    for module in (False, True):
        if any(accepted_by(text, module).values()):
            assert syntax_stage(text) is None, text


# ---- derived from kestrel.lark, failing loudly on what it cannot translate


def test_keyword_spellings_agree_with_the_language_card() -> None:
    """The card's grammar (kestrel.models.grammar) and the export read the terminals apart;
    both must spell each keyword the same."""
    from kestrel.models.grammar import terminal_forms

    forms = terminal_forms(GRAMMAR)
    g = derive()
    for name, term in g.terms.items():
        if term.spelt is None or not term.spelt.folded:
            continue
        assert {w.upper() for w in term.spelt.words} == set(forms[name]), name


def test_names_exclude_only_the_keywords_the_tables_put_beside_a_name() -> None:
    g = derive()
    name = g.terms["NAME"]
    assert name.spelt is None
    # `not` may stand where a name does (an expression's start): it is never a name there
    assert acceptor("llguidance").accepts("PLAN a\nWHEN nothing > 1: FLAT\n")
    assert not acceptor("llguidance").accepts("PLAN a\nWHEN not > 1: FLAT\n")
    # other keywords stay names where only a name fits, as the language allows
    assert acceptor("gbnf").accepts("PLAN when\nWHEN plan > 1: FLAT\n")
    assert syntax_stage("PLAN when\nWHEN plan > 1: FLAT\n") is None


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("STP.3: /stp\\b/i", "STP.3: /(?<=x)stp\\b/i", "STP"),  # a lookbehind
        ("TTL.3: /ttl\\b/i", "TTL.3: /t+?l\\b/i", "TTL"),  # a lazy repeat
        ('STRING: /"(?:[^"\\\\\\r\\n]|\\\\["\\\\])*"/', "STRING: /(\")[^\"]*\\1/", "STRING"),  # a backreference
        ("FLAT.3: /flat\\b/i", "FLAT.3: /fl(?=a)at\\b/i", "FLAT"),  # a lookahead inside
        ("DURATION.2: /[0-9]+[smhd](?![A-Za-z0-9_.])/", "DURATION.2: /[0-9]+[smhdé]/", "DURATION"),
    ],
    ids=["lookbehind", "lazy", "backreference", "inner-lookahead", "non-ascii"],
)
def test_a_terminal_the_export_cannot_translate_fails_loudly(old: str, new: str, what: str) -> None:
    assert old in GRAMMAR
    with pytest.raises(NotTranslatable, match=what):
        export("llguidance", grammar=GRAMMAR.replace(old, new))


def test_a_rule_construct_the_export_cannot_translate_fails_loudly() -> None:
    text = GRAMMAR.replace("risk: _RISK risk_item+", "risk: _RISK risk_item ~ 1..3")
    with pytest.raises(NotTranslatable, match="rule construct"):
        export("gbnf", grammar=text)


def test_a_grammar_where_the_lexer_would_read_names_as_symbols_fails_loudly() -> None:
    """A cross-symbol read written as `SYMBOL . name(...)` would put SYMBOL where a name
    stands: Kestrel's lexer would then read every word there as a symbol."""
    text = GRAMMAR.replace("      | LPAR expr _RPAR -> paren",
                           "      | LPAR expr _RPAR -> paren\n      | SYMBOL _DOT NAME -> cross") + '\n_DOT: "."\n'
    with pytest.raises(NotTranslatable, match="symbol"):
        export("llguidance", grammar=text)


def test_a_new_statement_is_exported_without_a_change_to_the_exporter() -> None:
    text = GRAMMAR.replace("_statement: plan | view | standdown | pass_",
                           "_statement: plan | view | standdown | pass_ | flatten\nflatten: FLATTEN NUMBER?")
    text += "FLATTEN.3: /flatten\\b/i\n"
    for dialect in DIALECTS:
        out = export(dialect, grammar=text)
        assert ("/[Ff][Ll][Aa][Tt][Tt][Ee][Nn]/" if dialect == "llguidance" else '"FLATTEN"') in out
        Matcher(out, FMT[dialect])
    rules = read_bnf(export("gbnf", grammar=text), "gbnf")
    assert Recognizer(rules).accepts("FLATTEN 3\n") and Recognizer(rules).accepts("FLATTEN\n")
    assert not Recognizer(rules).accepts("FLATTEN3\n")  # a word and a number need a gap


def test_the_export_is_byte_identical_whatever_the_hash_seed() -> None:
    code = ("from kestrel.lang.dialects import export; import sys; "
            "sys.stdout.write(''.join(export(d, module=m) for d in ('llguidance','gbnf','ebnf') for m in (0,1)))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and len(runs.pop()) > 10_000


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        export("peg")  # type: ignore[arg-type]
