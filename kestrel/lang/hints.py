"""Syntax errors in words: a parse failure becomes one `syntax` diagnostic saying what was
found, what the parser could take there (in words, refined to what really can come next) and,
where the mistake is a common one, a hint at the fix (often a phrase another language would
accept: `THEN`, `&&`, `1e6`, `9:30am`, `TP`, a misspelt keyword)."""

from __future__ import annotations

import re
from functools import cache

from kestrel.lang.errors import Diagnostic
from kestrel.lang.lalr import ParseFailure
from kestrel.lang.lexer import LexError, keywords
from kestrel.lang.registry import FUNCTIONS, SERIES
from kestrel.lang.suggest import closest

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
    "XREAD": "another symbol's read like SPY.last",
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
    "CASH": "an amount like $5000",
    "EQUITY": "EQ (a share of equity: 10%EQ)",
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
_ORDER = {name: rank for rank, name in enumerate(_WORDS)}
_KEYWORDS = [word for word in _WORDS.values() if word.isupper() and word.isalpha()] + [
    "maxpos",
    "maxloss",
    "maxorders",
    "BUY",
    "SELL",
    "ABOVE",
    "BELOW",
]


@cache
def _keyword_words() -> dict[str, tuple[str, ...]]:
    """terminal -> the keywords that spell it (for did-you-mean among what the parser accepts)"""
    out: dict[str, tuple[str, ...]] = {}
    for word, term in keywords().items():
        out[term] = (*out.get(term, ()), word if term == "RISK_KEY" else word.upper())
    return out


_CHAR_HINTS: dict[str, str] = {
    "&": "write AND, not &&",
    "|": "write OR, not ||",
    "!": "write NOT x, or != to compare",
    "=": "compare with ==; a single = only names a pane argument (n=24)",
    "'": 'quote a reason with double quotes: STANDDOWN "reason"',
    "≥": "write >=",
    "≤": "write <=",
    "$": "prices are plain numbers: write 182.40, not $182.40 ($5000 sizes an order: BUY $5000 MKT)",
    "{": "Kestrel is not JSON: write statements like PLAN name WHEN cond: action",
    "[": "Kestrel has no lists: separate panes with commas and actions with `;`",
    "`": "reply with the bare Kestrel text: no ``` fences or backquotes around it",
}


def _expected(names: frozenset[str]) -> tuple[str, ...]:
    if not names:
        return ()
    words: list[str] = []
    for name in sorted(names, key=lambda terminal: (_ORDER.get(terminal, 999), terminal)):
        word = _WORDS.get(name, name)
        if word not in words:
            words.append(word)
    if len(words) > _MAX_EXPECTED:
        words = words[: _MAX_EXPECTED - 1] + ["…"]
    return tuple(words)


def line_of(text: str, line: int) -> str:
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
        "WHEN", *(keyword.upper() for keyword in _KEYWORDS)
    ) and not _close_keyword(word):
        return 'a reply is one statement: PLAN name WHEN cond: action, VIEW name: panes, STANDDOWN "why" or PASS'
    if "WHEN" in expected and word == ":":
        return "the plan header takes no `:`; rules follow it: PLAN name WHEN cond: action"
    wanted = [keyword for terminal in expected for keyword in _keyword_words().get(terminal, ())]
    if "WHEN" in expected and word[:1].isalpha() and "_UNTIL" in expected and prev.isalnum() \
            and closest(upper, wanted) is None:
        return "a plan name is one word: my_plan, not my plan"
    if expected == {"NAME"} and word == ":":
        return "name the view: VIEW scout: quote, bars(5m, 24)"
    return None


def _close_keyword(word: str) -> bool:
    return closest(word.upper(), [keyword.upper() for keyword in _KEYWORDS]) is not None


def _syntax_hint(text: str, err: ParseFailure | LexError, got: str, expected: frozenset[str]) -> str | None:
    if got.startswith("$") and "CASH" not in expected:
        return "prices are plain numbers: write 182.40, not $182.40 ($5000 sizes an order: BUY $5000 MKT)"
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
        wanted = [keyword for terminal in expected for keyword in _keyword_words().get(terminal, ())]
        known = word in SERIES or word in FUNCTIONS
        if known and expected & {"SIDE", "FLAT"}:
            return f"`{word}` is a value; after `:` comes an action: BUY, SELL, FLAT or CANCEL"
        pools = [] if known else [wanted, _KEYWORDS]
        for pool in pools:
            upper = {keyword.upper(): keyword for keyword in pool}
            close = closest(word.upper(), upper)
            if close is not None and close != word.upper():
                return f"did you mean `{upper[close]}`?"
        if word.lower() in keywords() and "NAME" in expected:
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


def syntax_diag(text: str, err: ParseFailure | LexError) -> Diagnostic:
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
        match = _BAD_WORD.match(text, err.pos)
        got = match.group() if match else text[err.pos]
        if "`" in got:
            what = "backquote `"
        elif got.isprintable():
            what = f"`{_clip(got)}`"
        else:
            what = f"character U+{ord(got[0]):04X}"
        width = len(got) if match else 1
    return Diagnostic(
        "syntax",
        f"unexpected {what}",
        line,
        col,
        width,
        excerpt=line_of(text, line),
        expected=_expected(expected),
        hint=_syntax_hint(text, err, got, expected),
    )


def _clip(text: str, most: int = 24) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


__all__ = ["line_of", "syntax_diag"]
