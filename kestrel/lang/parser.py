"""Text to AST: lark compiles `kestrel.lark` into LALR tables and reduction callbacks once
per thread; `_Machine` drives those tables with `lexer.tokens`, the callbacks (`_Builder`)
build the AST during the parse and record token positions on the side, then the checker walks
the AST once.

`parse` never raises anything but `LangError`: syntax errors, recursion, odd input types and
number overflow are all mapped to diagnostics.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from importlib import resources
from collections.abc import Callable
from typing import Any

from functools import partial

from lark import Lark, Token, Transformer
from lark.parse_tree_builder import ChildFilterLALR, ChildFilterLALR_NoPlaceholders, ExpandSingleChild
from lark.parsers.lalr_analysis import Shift

from kestrel.lang.ast import (
    And,
    Arith,
    Call,
    Cancel,
    Compare,
    Crosses,
    Duration,
    Expr,
    Flat,
    For,
    Ident,
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
    Statement,
    TimeOfDay,
    Until,
    View,
)
from kestrel.lang.checker import Loc, check_located
from kestrel.lang.errors import Diagnostic, LangError
from kestrel.lang.lexer import KEYWORDS, LexError, tokens
from kestrel.lang.limits import DEFAULT_LIMITS, Limits
from kestrel.lang.registry import FUNCTIONS, SERIES

# A whole-number literal longer than this is clamped (and then rejected by the range check)
# instead of being converted, so no input can make int() do quadratic work or fail.
_MAX_DIGITS = 18
_BIG: int = 10**_MAX_DIGITS


def _int(text: str) -> int:
    return _BIG if len(text) > _MAX_DIGITS else int(text)


def _float(text: str) -> float:
    return float(text)  # linear in the (size-bounded) text; huge values become inf -> range error


def _whole(v: float) -> int:
    """`int(v)` for finite values below 1e18, else a clamped value the range check rejects."""
    if math.isfinite(v) and abs(v) < 1e18:
        return int(v)
    return -_BIG if v < 0 else _BIG


def _is_whole(v: float) -> bool:
    return not math.isfinite(v) or v == _whole(v)


_ESCAPE = re.compile(r'\\(["\\])')


class _Builder(Transformer[Token, Any]):
    """Builds AST nodes during the LALR parse; positions go to `self.pos` keyed by
    `id(node)` or `(id(node), field)`; the node is kept alive alongside so ids stay unique."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.reset()

    def reset(self) -> None:
        # id(node) or (id(node), field) -> (node kept alive, first token, last token)
        self.pos: dict[Any, tuple[object, Token, Token]] = {}
        self.parens: set[int] = set()
        self.diags: list[Diagnostic] = []

    # ---- positions (tokens only; a Loc is computed when a diagnostic needs one)
    def _at(self, node: Any, tok: Token, end: Token | None = None, field: str | None = None) -> Any:
        self.pos[id(node) if field is None else (id(node), field)] = (
            node,
            tok,
            tok if end is None else end,
        )
        return node

    def _span(self, node: Any, first: Any, last: Any) -> Any:
        pos = self.pos
        a = pos.get(id(first))
        if a is not None:
            b = pos.get(id(last))
            pos[id(node)] = (node, a[1], a[2] if b is None else b[2])
        return node

    def _copy(self, node: Any, source: Any) -> None:
        hit = self.pos.get(id(source))
        if hit is not None:
            self.pos[id(node)] = (node, hit[1], hit[2])

    def _diag(self, code: str, message: str, tok: Token, hint: str | None = None) -> None:
        self.diags.append(
            Diagnostic(code, message, tok.line, tok.column, max(1, len(tok)), hint=hint)
        )

    # ---- literals
    def number(self, c: list[Token]) -> Number:
        return self._at(Number(_float(c[0])), c[0])  # type: ignore[no-any-return]

    def neg_number(self, c: list[Token]) -> Number:
        return self._at(Number(-_float(c[1])), c[0], c[1])  # type: ignore[no-any-return]

    def percent(self, c: list[Token]) -> Percent:
        return self._at(Percent(_float(c[0][:-1])), c[0])  # type: ignore[no-any-return]

    def neg_percent(self, c: list[Token]) -> Percent:
        return self._at(Percent(-_float(c[1][:-1])), c[0], c[1])  # type: ignore[no-any-return]

    def duration(self, c: list[Token]) -> Duration:
        t = c[0]
        return self._at(Duration(_int(t[:-1]), t[-1]), t)  # type: ignore[arg-type, no-any-return]

    def tod(self, c: list[Token]) -> TimeOfDay:
        parts = [int(p) for p in c[0].split(":")]
        return self._at(TimeOfDay(*parts), c[0])  # type: ignore[no-any-return]

    def ident(self, c: list[Token]) -> Ident:
        return self._at(Ident(str(c[0])), c[0])  # type: ignore[no-any-return]

    # ---- expressions
    def series(self, c: list[Token]) -> Series:
        return self._at(Series(str(c[0])), c[0])  # type: ignore[no-any-return]

    def call(self, c: list[Any]) -> Call:
        name: Token = c[0]
        args = tuple(a for a in c[1:] if a is not None)
        node = Call(str(name), args)
        self._at(node, name)
        self._at(node, name, field="name")
        return node

    def paren(self, c: list[Any]) -> Expr:
        inner: Expr = c[1]
        self.parens.add(id(inner))
        return inner

    def neg(self, c: list[Any]) -> Expr:
        minus: Token = c[0]
        operand = c[1]
        if isinstance(operand, (Number, Percent)) and id(operand) not in self.parens:
            node: Expr = type(operand)(-operand.value)
        else:
            node = Neg(operand)
        hit = self.pos.get(id(operand))
        self.pos[id(node)] = (node, minus, minus if hit is None else hit[2])
        return node

    def sum(self, c: list[Any]) -> Expr:
        """`a op b op c ...` flat: fold `*` `/` first, then `+` `-`, both left-associative."""
        terms: list[Any] = [c[0]]
        ops: list[Token] = []
        for i in range(1, len(c), 2):
            op, right = c[i], c[i + 1]
            if op.type in ("STAR", "SLASH"):
                terms[-1] = self._arith(terms[-1], op, right)
            else:
                ops.append(op)
                terms.append(right)
        node = terms[0]
        for op, right in zip(ops, terms[1:]):
            node = self._arith(node, op, right)
        return node  # type: ignore[no-any-return]

    def _arith(self, left: Expr, op: Token, right: Expr) -> Arith:
        node = Arith(str(op), left, right)  # type: ignore[arg-type]
        self._at(node, op, field="op")
        return self._span(node, left, right)  # type: ignore[no-any-return]

    def compare(self, c: list[Any]) -> Compare:
        node = Compare(str(c[1]), c[0], c[2])  # type: ignore[arg-type]
        self._at(node, c[1], field="op")
        return self._span(node, c[0], c[2])  # type: ignore[no-any-return]

    def crosses(self, c: list[Any]) -> Crosses:
        node = Crosses(c[1].lower(), c[0], c[2])
        self._at(node, c[1], field="op")
        return self._span(node, c[0], c[2])  # type: ignore[no-any-return]

    def not_(self, c: list[Any]) -> Not:
        node = Not(c[1])
        self._at(node, c[0])
        return node

    def bool_seq(self, c: list[Any]) -> Expr:
        """`a AND b OR c ...` flat: AND binds tighter than OR; chains become one node."""
        groups: list[list[Any]] = [[c[0]]]
        for i in range(1, len(c), 2):
            if c[i].type == "OR":
                groups.append([c[i + 1]])
            else:
                groups[-1].append(c[i + 1])
        terms = [
            g[0] if len(g) == 1 else self._span(And(tuple(g)), g[0], g[-1]) for g in groups
        ]
        if len(terms) == 1:
            return terms[0]  # type: ignore[no-any-return]
        return self._span(Or(tuple(terms)), terms[0], terms[-1])  # type: ignore[no-any-return]

    # ---- actions
    def offset(self, c: list[Token]) -> Offset:
        first, last = c[0], c[-1]
        if first.type == "AT":
            return self._at(Offset("at", _float(last)), first, last)  # type: ignore[no-any-return]
        sign = -1.0 if first.type == "MINUS" else 1.0
        if last.type == "PERCENT":
            return self._at(Offset("pct", sign * _float(last[:-1])), first, last)  # type: ignore[no-any-return]
        return self._at(Offset("abs", sign * _float(last)), first, last)  # type: ignore[no-any-return]

    def stop(self, c: list[Any]) -> tuple[str, Any, Token]:
        return ("stop", c[1], c[0])

    def target(self, c: list[Any]) -> tuple[str, Any, Token]:
        return ("target", c[1], c[0])

    def trail(self, c: list[Any]) -> tuple[str, Any, Token]:
        off: Offset = c[1]
        if off.mode != "at" and off.value < 0:
            flipped = Offset(off.mode, -off.value)
            self._copy(flipped, off)
            off = flipped
        return ("trail", off, c[0])

    def ttl(self, c: list[Token]) -> tuple[str, Any, Token]:
        return ("ttl", self.duration([c[1]]), c[0])

    def order(self, c: list[Any]) -> Order:
        side_tok: Token = c[0]
        i = 1
        negative = False
        if isinstance(c[i], Token) and c[i].type == "MINUS":
            negative, i = True, i + 1
        qty_tok: Token = c[i]
        i += 1
        if "." in qty_tok and not _is_whole(float(qty_tok)):
            low = _whole(float(qty_tok))
            self._diag(
                "bad-qty",
                f"quantity must be a whole number of shares, got {qty_tok}",
                qty_tok,
                hint=f"write {low} or {low + 1}",
            )
        qty = _int(qty_tok.split(".")[0])
        qty = -qty if negative else qty
        order_type = "mkt"
        price: Expr | None = None
        fields: dict[str, Any] = {}
        while i < len(c):
            item = c[i]
            if isinstance(item, Token):
                order_type = item.type.lower()
                if order_type in ("lmt", "stp"):
                    price = c[i + 1]
                    i += 1
            else:
                key, value, kw = item
                if key in fields:
                    self._diag(
                        "duplicate",
                        f"{kw.upper()} given twice in one order",
                        kw,
                        hint=f"keep a single {kw.upper()}",
                    )
                fields[key] = value
            i += 1
        node = Order(
            side_tok.lower(),  # type: ignore[arg-type]
            qty,
            order_type,  # type: ignore[arg-type]
            price,
            fields.get("stop"),
            fields.get("target"),
            fields.get("trail"),
            fields.get("ttl"),
        )
        self._at(node, side_tok)
        self._at(node, c[1], qty_tok, field="qty")
        return node

    def flat(self, c: list[Token]) -> Flat:
        return self._at(Flat(), c[0])  # type: ignore[no-any-return]

    def cancel(self, c: list[Token]) -> Cancel:
        return self._at(Cancel(), c[0])  # type: ignore[no-any-return]

    def rule(self, c: list[Any]) -> Rule:
        when: Token = c[0]
        repeat = 1
        rest = c[2:]
        rep_tok: Token | None = None
        if rest and isinstance(rest[-1], Token):
            rep_tok = rest.pop()
            repeat = _int(rep_tok[1:])
        node = Rule(c[1], tuple(rest), repeat)
        self._at(node, when)
        if rep_tok is not None:
            self._at(node, rep_tok, field="repeat")
        return node

    # ---- statements
    def on(self, c: list[Token]) -> tuple[str, Any, Token]:
        return ("instrument", str(c[0]), c[0])

    def until(self, c: list[Any]) -> tuple[str, Any, Token]:
        tod = self.tod(c)
        node = Until(tod)
        self._at(node, c[0])
        return ("expiry", node, c[0])

    def for_(self, c: list[Token]) -> tuple[str, Any, Token]:
        node = For(self.duration(c))
        self._at(node, c[0])
        return ("expiry", node, c[0])

    def risk_item(self, c: list[Token]) -> tuple[str, float, Token, Token]:
        negative = len(c) == 3
        value = _float(c[-1])
        return (c[0].lower(), -value if negative else value, c[0], c[-1])

    def risk(self, c: list[Any]) -> tuple[str, Any, Token]:
        values: dict[str, float] = {}
        toks: dict[str, tuple[Token, Token]] = {}
        for key, value, kt, vt in c:
            if key in values:
                self._diag("duplicate", f"{key} given twice", kt, hint=f"keep a single {key}")
            if key != "maxloss" and not _is_whole(value):
                low = _whole(value)
                self._diag(
                    "bad-risk", f"{key} must be a whole number, got {vt}", vt,
                    hint=f"write {key} {low} or {key} {low + 1}",
                )
            values[key] = value
            toks[key] = (kt, vt)

        def whole(key: str) -> int | None:
            v = values.get(key)
            return None if v is None else _whole(v)

        ml = values.get("maxloss")
        node = Risk(whole("maxpos"), ml, whole("maxorders"))
        for key, (kt, vt) in toks.items():
            self._at(node, kt, vt, field=key)
        return ("risk", node, c[0][2])

    def plan(self, c: list[Any]) -> Plan:
        plan_tok: Token = c[0]
        name_tok: Token = c[1]
        header: dict[str, Any] = {}
        rules: list[Rule] = []
        for item in c[2:]:
            if isinstance(item, Rule):
                rules.append(item)
                continue
            key, value, tok = item
            if key in header:
                what = {"instrument": "ON", "expiry": "an expiry (UNTIL or FOR)", "risk": "RISK"}
                self._diag(
                    "duplicate",
                    f"the plan header gives {what[key]} twice",
                    tok,
                    hint="give each header part once: PLAN name [ON SYM] [UNTIL hh:mm | FOR dur] [RISK ...]",
                )
            header[key] = (value, tok)
        inst = header.get("instrument")
        expiry = header.get("expiry")
        risk = header.get("risk")
        node = Plan(
            str(name_tok),
            tuple(rules),
            inst[0] if inst else None,
            expiry[0] if expiry else None,
            risk[0] if risk else Risk(),
        )
        self._at(node, plan_tok)
        self._at(node, name_tok, field="name")
        if inst:
            self._at(node, inst[1], field="instrument")
        return node

    def named_arg(self, c: list[Any]) -> PaneArg:
        node = PaneArg(c[1], str(c[0]))
        self._at(node, c[0])
        return node

    def pos_arg(self, c: list[Any]) -> PaneArg:
        node = PaneArg(c[0])
        self._copy(node, c[0])
        return node

    def pane(self, c: list[Any]) -> PaneRef:
        node = PaneRef(str(c[0]), tuple(a for a in c[1:] if a is not None))
        self._at(node, c[0])
        return node

    def budget(self, c: list[Token]) -> tuple[str, float, Token]:
        value = _float(c[-1])
        return ("budget", -value if len(c) == 2 else value, c[0])

    def view(self, c: list[Any]) -> View:
        budget: int | None = None
        panes = list(c[2:])
        if panes and isinstance(panes[-1], tuple):
            _, value, tok = panes.pop()
            if not _is_whole(value):
                self._diag("bad-budget", "BUDGET must be a whole number of tokens", tok,
                           hint=f"write BUDGET {max(1, _whole(value))}")
            budget = _whole(value)
        node = View(str(c[1]), tuple(panes), budget)
        self._at(node, c[0])
        self._at(node, c[1], field="name")
        if budget is not None:
            self._at(node, c[-1][2], field="budget")
        return node

    def standdown(self, c: list[Token]) -> StandDown:
        reason = _ESCAPE.sub(r"\1", c[1][1:-1]) if len(c) > 1 else None
        node = StandDown(reason)
        self._at(node, c[0])
        if len(c) > 1:
            self._at(node, c[1], field="reason")
        return node

    def pass_(self, c: list[Token]) -> Pass:
        return self._at(Pass(), c[0])  # type: ignore[no-any-return]

    def start(self, c: list[Any]) -> list[Statement]:
        return c


# --------------------------------------------------------------------------------------------
# Syntax errors in words

_WORDS: dict[str, str] = {
    "_COLON": "`:`",
    "_RPAR": "`)`",
    "_COMMA": "`,`",
    "_SEMI": "`;`",
    "CMP": "a comparison (< <= > >= == !=)",
    "AND": "AND",
    "OR": "OR",
    "_CROSSES": "CROSSES",
    "DIRECTION": "ABOVE or BELOW",
    "PLUS": "`+`",
    "MINUS": "`-`",
    "STAR": "`*`",
    "SLASH": "`/`",
    "NAME": "a name",
    "NUMBER": "a number",
    "PERCENT": "a percentage like 0.6%",
    "DURATION": "a duration like 30m",
    "TIME": "a time like 15:45",
    "LPAR": "`(`",
    "_LPAR": "`(`",
    "NOT": "NOT",
    "AT": "`@`",
    "SYMBOL": "an upper-case symbol like AAPL",
    "STRING": 'a "quoted reason"',
    "_EQ": "`=`",
    "SIDE": "BUY or SELL",
    "FLAT": "FLAT",
    "CANCEL": "CANCEL",
    "MKT": "MKT",
    "LMT": "LMT",
    "STP": "STP",
    "STOP": "STOP",
    "TARGET": "TARGET",
    "TRAIL": "TRAIL",
    "TTL": "TTL",
    "REPEAT": "a repeat like x3",
    "WHEN": "WHEN",
    "_ON": "ON",
    "_UNTIL": "UNTIL",
    "_FOR": "FOR",
    "_RISK": "RISK",
    "RISK_KEY": "maxpos, maxloss or maxorders",
    "_BUDGET": "BUDGET",
    "PLAN": "PLAN",
    "VIEW": "VIEW",
    "STANDDOWN": "STANDDOWN",
    "PASS": "PASS",
    "$END": "the end of the document",
}
_MAX_EXPECTED = 10
_ORDER = {name: i for i, name in enumerate(_WORDS)}
_KEYWORDS = [w for w in _WORDS.values() if w.isupper() and w.isalpha()] + [
    "maxpos",
    "maxloss",
    "maxorders",
    "BUY",
    "SELL",
    "ABOVE",
    "BELOW",
]

# terminal -> the keywords that spell it (for did-you-mean among what the parser accepts)
_KEYWORD_WORDS: dict[str, tuple[str, ...]] = {}
for _word, _term in KEYWORDS.items():
    _KEYWORD_WORDS[_term] = (*_KEYWORD_WORDS.get(_term, ()), _word if _term == "RISK_KEY" else _word.upper())

_CHAR_HINTS: dict[str, str] = {
    "&": "write AND, not &&",
    "|": "write OR, not ||",
    "!": "write NOT x, or != to compare",
    "=": "compare with ==; a single = only names a pane argument (n=24)",
    "'": 'quote a reason with double quotes: STANDDOWN "reason"',
    "≥": "write >=",
    "≤": "write <=",
    "$": "prices are plain numbers: write 182.40, not $182.40",
    "{": "Kestrel is not JSON: write statements like PLAN name WHEN cond: action",
    "[": "Kestrel has no lists: separate panes with commas and actions with `;`",
    "`": "reply with the bare Kestrel text: no ``` fences or backquotes around it",
}


def _expected(names: frozenset[str]) -> tuple[str, ...]:
    if not names:
        return ()
    words: list[str] = []
    for name in sorted(names, key=lambda n: (_ORDER.get(n, 999), n)):
        w = _WORDS.get(name, name)
        if w not in words:
            words.append(w)
    if len(words) > _MAX_EXPECTED:
        words = words[: _MAX_EXPECTED - 1] + ["…"]
    return tuple(words)


def _line_of(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""


_WORD_OR_MARK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[^\sA-Za-z_]+")
_BAD_WORD = re.compile(r"[0-9A-Za-z_.%]+(?::[0-9]+)*")


# words from other trading vocabularies -> what Kestrel says instead
_SYNONYMS: dict[str, str] = {
    "TP": "TARGET +1%", "TAKEPROFIT": "TARGET +1%", "TAKE_PROFIT": "TARGET +1%",
    "PROFIT": "TARGET +1%", "SL": "STOP -0.5%", "STOPLOSS": "STOP -0.5%",
    "STOP_LOSS": "STOP -0.5%", "TRAILING": "TRAIL 0.5%", "LONG": "BUY", "SHORT": "SELL",
    "CLOSE": "FLAT", "EXIT": "FLAT", "GTD": "TTL 20m", "EXPIRE": "TTL 20m",
}


def _phrase_hint(
    text: str, err: ParseFailure, word: str, expected: frozenset[str]
) -> str | None:
    """Hints for phrases other languages would accept: `THEN`, `,` between actions,
    `BUY 100 shares`, `TTL 20`, an unquoted reason, thousands separators, `IF`."""
    at = err.token.start_pos or 0
    prev = text[:at].rstrip()[-1:]
    upper = word.upper()
    if upper in _SYNONYMS and expected & {"STOP", "SIDE", "_SEMI"}:
        return f"write {_SYNONYMS[upper]} (Kestrel's word for {word})"
    if upper == "THEN" and "_COLON" in expected:
        return "end the condition with `:` before the actions: WHEN cond: action"
    if "_SEMI" in expected and upper in (",", "AND", "&", "&&", "THEN"):
        return "separate the actions of a rule with `;`: BUY 100 MKT; CANCEL"
    if word == "," and prev.isdigit():
        return "write numbers without thousands separators: 1000000"
    if "MKT" in expected and word[:1].isalpha() and not _close_keyword(word):
        return "write the order type after the quantity: MKT, LMT price or STP price"
    if expected == {"DURATION"} and word[:1].isdigit():
        return f"a duration needs its unit: {word}m or {word}s"
    if "STRING" in expected and word[:1].isalpha():
        return 'quote the reason: STANDDOWN "spread too wide"'
    if "PLAN" in expected and "WHEN" not in expected and word[:1].isalpha() and upper not in (
        "WHEN", *(w.upper() for w in _KEYWORDS)
    ) and not _close_keyword(word):
        return 'a reply is one statement: PLAN name WHEN cond: action, VIEW name: panes, STANDDOWN "why" or PASS'
    if "WHEN" in expected and word == ":":
        return "the plan header takes no `:`; rules follow it: PLAN name WHEN cond: action"
    wanted = [w for n in expected for w in _KEYWORD_WORDS.get(n, ())]
    if "WHEN" in expected and word[:1].isalpha() and "_UNTIL" in expected and prev.isalnum() \
            and not difflib.get_close_matches(upper, wanted, n=1, cutoff=0.7):
        return "a plan name is one word: my_plan, not my plan"
    if expected == {"NAME"} and word == ":":
        return "name the view: VIEW scout: quote, bars(5m, 24)"
    return None


def _close_keyword(word: str) -> bool:
    return bool(difflib.get_close_matches(word.upper(), [w.upper() for w in _KEYWORDS], n=1, cutoff=0.7))


def _syntax_hint(text: str, err: ParseFailure | LexError, got: str, expected: frozenset[str]) -> str | None:
    if isinstance(err, LexError):
        if re.fullmatch(r"[0-9][0-9.]*[eE][-+]?[0-9]+|[0-9]+(_[0-9]+)+", got):
            return "write numbers in full: 1000000, not 1e6 or 1_000_000"
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?[A-Za-z]+", got):
            return "a duration is a whole number and one unit of s, m, h or d: write 90m, not 1.5h or 90min"
        if re.fullmatch(r"\.[0-9]+", got):
            return f"write numbers with a leading digit: 0{got}, not {got}"
        if any(ch.isdigit() for ch in got) and re.fullmatch(r"[0-9.]+", got):
            return "write numbers like 182.40: digits, one point, digits"
        if got in _CHAR_HINTS:
            return _CHAR_HINTS[got]
        if got[:1] in _CHAR_HINTS:
            return _CHAR_HINTS[got[:1]]
        if got[:1] == '"':
            return 'a reason is one line of text in double quotes; escape " as \\"'
        if got[:1].isalpha():
            return "names use ASCII letters, digits and _ only"
        return None
    word = got.strip()
    phrase = _phrase_hint(text, err, word, expected)
    if phrase is not None:
        return phrase
    if word.upper() == "WHEN" and "PLAN" in expected:
        return "a rule belongs to a plan: start with PLAN name, then WHEN cond: action"
    if "SYMBOL" in expected and word[:1].isalpha():
        return f"instrument symbols are upper case: ON {word.upper()}"
    if "_COLON" in expected and not expected & {"NAME", "NUMBER"}:
        if word.upper() in {"BUY", "SELL", "FLAT", "CANCEL"}:
            return "end the condition with `:` before the actions: WHEN cond: action"
    if "MKT" in expected and word[:1].isdigit():
        return "write the order type after the quantity: MKT, LMT price or STP price"
    if word and expected & {"STOP", "TARGET", "TRAIL", "TTL"} and word[:1] in "0123456789@+-":
        at = err.token.start_pos or 0
        before = _WORD_OR_MARK.findall(text, max(0, at - 80), at)
        if before and before[-1].lower() in ("mkt", "market"):
            return "MKT takes no price; write LMT price for a limit order"
        if (len(before) > 1 and before[-2].lower() in ("lmt", "limit", "stp")
                and before[-1].upper() in ("STOP", "TARGET", "TRAIL", "TTL")):
            kind = before[-2].upper()
            return f"a {kind} order needs its price right after {kind}: BUY 100 {kind} 182.40 {before[-1].upper()} ..."
        return "after the order come only STOP, TARGET, TRAIL, TTL, `;` or a repeat like x3"
    if word and (word[0].isalpha() or word[0] == "_"):
        # a keyword the parser could take here first; any keyword only for a word that is
        # not itself a series or function name (`last` is not a misspelt FLAT)
        wanted = [w for n in expected for w in _KEYWORD_WORDS.get(n, ())]
        known = word in SERIES or word in FUNCTIONS
        if known and expected & {"SIDE", "FLAT"}:
            return f"`{word}` is a value; after `:` comes an action: BUY, SELL, FLAT or CANCEL"
        pools = [] if known else [wanted, _KEYWORDS]
        for pool in pools:
            upper = {w.upper(): w for w in pool}
            close = difflib.get_close_matches(word.upper(), list(upper), n=1, cutoff=0.7)
            if close and close[0] != word.upper():
                return f"did you mean `{upper[close[0]]}`?"
        if word.lower() in KEYWORDS and "NAME" in expected:
            return f"`{word}` is a keyword; pick another name"
    if word.lower() in ("am", "pm"):
        return "times are 24-hour hh:mm: write 09:30 or 15:45, not 9:30am or 3:45pm"
    if word == "=":
        return "compare with ==; a single = only names a pane argument (n=24)"
    if got == "" and "WHEN" in expected and "PLAN" not in expected:
        return "a PLAN needs at least one rule: WHEN cond: action"
    if got == "" and expected & {"SIDE", "FLAT"}:
        return "a rule needs an action after `:` (BUY, SELL, FLAT or CANCEL)"
    return None


def _syntax_diag(text: str, err: ParseFailure | LexError) -> Diagnostic:
    if isinstance(err, ParseFailure):
        expected = err.expected
        tok = err.token
        got = "" if tok.type == "$END" else str(tok)
        if tok.type == "$END":
            lines = text.rstrip().split("\n")
            line, col = len(lines), len(lines[-1].rstrip("\r")) + 1
            what = "end of the document"
        else:
            line, col = tok.line or 1, tok.column or 1
            what = f"`{_clip(got)}`"
        width = max(1, len(got))
    else:
        expected = err.accepts
        line, col = err.line, err.column
        m = _BAD_WORD.match(text, err.pos)
        got = m.group() if m else text[err.pos]
        if "`" in got:
            what = "backquote `"
        elif got.isprintable():
            what = f"`{_clip(got)}`"
        else:
            what = f"character U+{ord(got[0]):04X}"
        width = len(got) if m else 1
    return Diagnostic(
        "syntax",
        f"unexpected {what}",
        line,
        col,
        width,
        excerpt=_line_of(text, line),
        expected=_expected(expected),
        hint=_syntax_hint(text, err, got, expected),
    )


def _clip(s: str, n: int = 24) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


# --------------------------------------------------------------------------------------------
# The parser


class ParseFailure(Exception):
    """The parser met `token` in a state that accepts only `expected` terminals."""

    def __init__(self, token: Token, expected: frozenset[str]) -> None:
        super().__init__(f"unexpected {token.type}")
        self.token = token
        self.expected = expected


def _accepted(stack: list[int], table: dict[int, dict[str, tuple[bool, Any]]]) -> frozenset[str]:
    """The terminals that really can come next: LALR rows merge lookaheads from several
    contexts, so each candidate is replayed through its reductions until it shifts or fails
    (error path only)."""
    out: set[str] = set()
    for term in table[stack[-1]]:
        if not term.isupper():
            continue
        states = list(stack)
        while True:
            act = table[states[-1]].get(term)
            if act is None:
                break
            if act[0] or term == "$END" and act[1][1] == "start" and len(states) - act[1][0] == 1:
                out.add(term)
                break
            size, origin, _ = act[1]
            if size:
                del states[-size:]
            states.append(table[states[-1]][origin][1])
    return frozenset(out)


_Callback = Callable[[list[Any]], Any]


def _identity(children: list[Any]) -> list[Any]:
    return children


def _flatten(cb: Any) -> _Callback:
    """lark's reduction callback as one plain closure: lark wraps the builder's methods in
    child filters and builds a `Tree` for every inlined helper rule (`_bracket`, `x*`), only
    for the parent to unpack its `.children`. Here an inlined rule's value is the children
    list itself (each reduction gets a fresh list) and the parent splices it in. Any callback
    shape not listed fails at import, so a lark upgrade cannot change the AST silently."""
    if isinstance(cb, ExpandSingleChild):
        inner = _flatten(cb.node_builder)
        return lambda ch: ch[0] if len(ch) == 1 else inner(ch)
    if isinstance(cb, ChildFilterLALR_NoPlaceholders):
        plan = [(i, expand, 0) for i, expand in cb.to_include]
        return _filter(plan, 0, _flatten(cb.node_builder))
    if isinstance(cb, ChildFilterLALR):
        plan = list(cb.to_include)
        return _filter(plan, cb.append_none, _flatten(cb.node_builder))
    if isinstance(cb, partial) and getattr(cb.func, "__name__", "") == "default_callback":
        return _identity
    if callable(cb) and getattr(cb, "__self__", None) is not None:
        return cb  # type: ignore[no-any-return]  # a _Builder method
    raise TypeError(f"unsupported lark callback {cb!r}")


def _filter(plan: list[tuple[int, bool, int]], trailing: int, inner: _Callback) -> _Callback:
    if not any(expand or nones for _, expand, nones in plan) and not trailing:
        keep = [i for i, _, _ in plan]
        return lambda ch: inner([ch[i] for i in keep])

    def run(ch: list[Any]) -> Any:
        out: list[Any] = []
        for i, expand, nones in plan:
            if nones:
                out += [None] * nones
            if expand:
                if out:
                    out += ch[i]
                else:  # reuse the inlined rule's own list: `x*` stays linear, not quadratic
                    out = ch[i]
            else:
                out.append(ch[i])
        if trailing:
            out += [None] * trailing
        return inner(out)

    return run


class _Machine:
    """lark compiles the grammar into LALR tables and AST-building callbacks once; this
    loop drives them directly (shift, or reduce by calling the rule's callback), fed by
    `lexer.tokens`. One instance per thread: the builder holds per-parse positions."""

    def __init__(self) -> None:
        self.builder = _Builder()
        lark = Lark(
            GRAMMAR,
            parser="lalr",
            lexer="contextual",
            transformer=self.builder,
            maybe_placeholders=True,
        )
        inner = lark.parser.parser.parser
        table = inner.parse_table
        callbacks = {rule: _flatten(cb) for rule, cb in inner.callbacks.items()}
        self.start: int = table.start_states["start"]
        self.table: dict[int, dict[str, tuple[bool, Any]]] = {}  # state -> terminal -> action
        for state, actions in table.states.items():
            row: dict[str, tuple[bool, Any]] = {}
            for term, (action, arg) in actions.items():
                if action is Shift:
                    row[str(term)] = (True, arg)
                else:
                    size = len(arg.expansion)
                    # a `?rule` reduced from one child passes that child through: no call
                    unit = size == 1 and isinstance(inner.callbacks[arg], ExpandSingleChild)
                    row[str(term)] = (
                        False,
                        (size, str(arg.origin.name), None if unit else callbacks[arg]),
                    )
            self.table[state] = row

    def run(self, text: str) -> Any:
        table = self.table
        stack = [self.start]
        values: list[Any] = []
        last: Token | None = None
        for tok in tokens(text, stack, table, _accepted):
            last = tok
            kind = tok.type
            while True:
                row = table[stack[-1]]
                act = row.get(kind)
                if act is None:
                    raise ParseFailure(tok, _accepted(stack, table))
                if act[0]:
                    stack.append(act[1])
                    values.append(tok)
                    break
                size, origin, callback = act[1]
                if callback is None:  # unit pass-through: the value stays, the state moves
                    del stack[-1]
                    stack.append(table[stack[-1]][origin][1])
                    continue
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                stack.append(table[stack[-1]][origin][1])
        end = (
            Token.new_borrow_pos("$END", "", last) if last is not None else Token("$END", "", 0, 1, 1)
        )
        while True:
            row = table[stack[-1]]
            act = row.get("$END")
            if act is None:
                raise ParseFailure(end, _accepted(stack, table))
            size, origin, callback = act[1]
            children = values[-size:] if size else []
            if size:
                del stack[-size:]
                del values[-size:]
            value = children[0] if callback is None else callback(children)
            if origin == "start" and len(stack) == 1:
                return value
            stack.append(table[stack[-1]][origin][1])
            values.append(value)


class _State(threading.local):
    machine: _Machine | None = None


_STATE = _State()
GRAMMAR: str = resources.files("kestrel.lang").joinpath("kestrel.lark").read_text("utf-8")


# lark's grammar loader keeps module-level state (its own cached grammar parser) that it
# does not promise to share safely: threads build their machines one at a time.
_BUILD_LOCK = threading.Lock()


def _machine() -> _Machine:
    if _STATE.machine is None:
        with _BUILD_LOCK:
            _STATE.machine = _Machine()
    return _STATE.machine


def _fail(code: str, message: str, hint: str | None = None) -> LangError:
    return LangError([Diagnostic(code, message, hint=hint)])


def parse(text: str, limits: Limits | None = None) -> Module | Statement:
    """Parse and type-check `text`. One statement returns that Statement; several return a
    Module. Raises `LangError` (and nothing else) listing every independent problem."""
    lim = limits if limits is not None else DEFAULT_LIMITS
    if not isinstance(text, str):
        raise _fail("not-text", f"expected Kestrel text (str), got {type(text).__name__}")
    if len(text) > lim.max_document_chars:
        raise _fail(
            "too-large",
            f"document is {len(text)} characters; the limit is {lim.max_document_chars}",
            hint="split it, or keep one statement per reply",
        )
    if text.startswith("\ufeff"):  # a byte-order mark is invisible in editors: drop it
        text = text[1:]
    if "\r" in text:  # CRLF and lone CR line ends count as one newline, as editors show them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    machine = _machine()
    builder = machine.builder
    builder.reset()
    try:
        statements: list[Statement] = machine.run(text)
    except (ParseFailure, LexError) as err:
        raise LangError([_syntax_diag(text, err)]) from None
    except RecursionError:
        raise _fail("too-deep", "document nested too deeply to parse") from None
    except Exception as err:  # a builder callback failing unforeseen: still one LangError
        raise _fail("invalid", f"document could not be parsed: {type(err).__name__}") from None
    finally:
        pos = builder.pos
        diags = builder.diags
        builder.reset()
    if not statements:
        raise _fail(
            "empty",
            "the document holds no statement",
            hint="reply with one statement: PLAN, VIEW, STANDDOWN or PASS",
        )
    root: Module | Statement = statements[0] if len(statements) == 1 else Module(tuple(statements))

    def locate(node: object, field: str | None = None) -> Loc | None:
        key = id(node) if field is None else (id(node), field)
        hit = pos.get(key)
        if hit is None and field is not None:
            hit = pos.get(id(node))
        if hit is None:
            return None
        first, last = hit[1], hit[2]
        if last.end_line == first.line:
            width = last.end_column - first.column  # type: ignore[operator]
        else:
            width = len(_line_of(text, first.line or 1)) - (first.column or 1) + 1
        return Loc(first.line or 1, first.column or 1, max(1, width))

    try:
        diags.extend(check_located(root, lim, locate, text))
    except RecursionError:
        diags.append(Diagnostic("too-deep", "document nested too deeply to check"))
    if diags:
        diags = [
            d if d.excerpt is not None or d.line is None
            else Diagnostic(d.code, d.message, d.line, d.column, d.width,
                            _line_of(text, d.line), d.expected, d.hint, d.path)
            for d in diags
        ]
        diags.sort(key=lambda d: (d.line or 0, d.column or 0))
        raise LangError(diags)
    return root


__all__ = ["GRAMMAR", "parse"]
