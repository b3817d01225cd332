"""The canonical formatter: AST to Kestrel text.

Invariants: `parse(format(a)) == a` for every valid AST; `format(parse(t))` is a fixed point.
Canonical form: upper-case keywords, one rule per line under its plan header, header parts in
the order ON, UNTIL/FOR, RISK; brackets in the order STOP, TARGET, TRAIL, TTL; single spaces
around binary operators; the fewest parentheses that keep the tree; statements separated by a
blank line.
"""

from __future__ import annotations

import re

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
    Rule,
    Series,
    StandDown,
    Statement,
    TimeOfDay,
    Until,
    View,
)
from kestrel.lang.errors import Diagnostic, LangError
from kestrel.lang.numbers import num


# Precedence levels (higher binds tighter).
_OR, _AND, _NOT, _CMP, _SUM, _PROD, _UNARY, _ATOM = range(8)


def _prec(e: Expr) -> int:
    if isinstance(e, Or):
        return _OR
    if isinstance(e, And):
        return _AND
    if isinstance(e, Not):
        return _NOT
    if isinstance(e, (Compare, Crosses)):
        return _CMP
    if isinstance(e, Arith):
        return _SUM if e.op in "+-" else _PROD
    if isinstance(e, Neg):
        return _UNARY
    if isinstance(e, (Number, Percent)) and e.value < 0:
        return _UNARY
    return _ATOM


def _wrap(e: Expr, min_prec: int) -> str:
    text = expr(e)
    return f"({text})" if _prec(e) < min_prec else text


def expr(e: Expr) -> str:
    """Format one expression."""
    if isinstance(e, Number):
        return num(e.value)
    if isinstance(e, Percent):
        return f"{num(e.value)}%"
    if isinstance(e, Duration):
        return f"{e.value}{e.unit}"
    if isinstance(e, TimeOfDay):
        return tod(e)
    if isinstance(e, Series):
        return e.name
    if isinstance(e, Call):
        return f"{e.name}({','.join(_wrap(a, _SUM) for a in e.args)})"
    if isinstance(e, Neg):
        inner = e.operand
        # a bare literal after `-` would be folded into a negative literal: keep the Neg
        if isinstance(inner, (Number, Percent)):
            return f"-({expr(inner)})"
        return "-" + _wrap(inner, _UNARY)
    if isinstance(e, Arith):
        level = _SUM if e.op in "+-" else _PROD
        right = _wrap(e.right, level + 1)
        sep = " " if right.startswith("-") else ""  # `1- -5`, never `1--5`
        return f"{_wrap(e.left, level)}{e.op}{sep}{right}"
    if isinstance(e, Compare):
        return f"{_wrap(e.left, _SUM)} {e.op} {_wrap(e.right, _SUM)}"
    if isinstance(e, Crosses):
        return f"{_wrap(e.left, _SUM)} CROSSES {e.direction.upper()} {_wrap(e.right, _SUM)}"
    if isinstance(e, Not):
        return "NOT " + _wrap(e.operand, _NOT)
    if isinstance(e, And):
        return " AND ".join(_wrap(o, _NOT) for o in e.operands)
    if isinstance(e, Or):
        return " OR ".join(_wrap(o, _AND) for o in e.operands)
    raise LangError([Diagnostic("not-expression", f"cannot format {type(e).__name__}")])


def tod(t: TimeOfDay) -> str:
    base = f"{t.hour:02d}:{t.minute:02d}"
    return base + (f":{t.second:02d}" if t.second else "")


def offset(o: Offset, signed: bool = True) -> str:
    if o.mode == "at":
        return f"@{num(o.value)}"
    sign = ("-" if o.value < 0 else "+") if signed else ""
    body = num(abs(o.value)) if signed else num(o.value)
    return f"{sign}{body}{'%' if o.mode == 'pct' else ''}"


def action(a: Order | Flat | Cancel) -> str:
    if isinstance(a, Flat):
        return "FLAT"
    if isinstance(a, Cancel):
        return "CANCEL"
    parts = [a.side.upper(), str(a.qty) if isinstance(a.qty, int) else num(a.qty), a.order_type.upper()]
    if a.price is not None:
        parts.append(_wrap(a.price, _SUM))
    if a.stop is not None:
        parts.append("STOP " + offset(a.stop))
    if a.target is not None:
        parts.append("TARGET " + offset(a.target))
    if a.trail is not None:
        parts.append("TRAIL " + offset(a.trail, signed=False))
    if a.ttl is not None:
        parts.append(f"TTL {a.ttl.value}{a.ttl.unit}")
    return " ".join(parts)


def rule(r: Rule) -> str:
    text = f"WHEN {expr(r.cond)}: " + "; ".join(action(a) for a in r.actions)
    return text + (f" x{r.repeat}" if r.repeat != 1 else "")


def _pane_arg(a: PaneArg) -> str:
    v = a.value
    text = v.name if isinstance(v, Ident) else expr(v)
    return f"{a.name}={text}" if a.name is not None else text


def _pane(p: PaneRef) -> str:
    if not p.args:
        return p.name
    return f"{p.name}({','.join(_pane_arg(a) for a in p.args)})"


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def statement(s: Statement) -> str:
    if isinstance(s, Plan):
        head = [f"PLAN {s.name}"]
        if s.instrument is not None:
            head.append(f"ON {s.instrument}")
        if isinstance(s.expiry, Until):
            head.append(f"UNTIL {tod(s.expiry.at)}")
        elif isinstance(s.expiry, For):
            head.append(f"FOR {s.expiry.span.value}{s.expiry.span.unit}")
        r = s.risk
        risk = [
            f"{k} {v if isinstance(v, int) else num(v)}"
            for k, v in (("maxpos", r.maxpos), ("maxloss", r.maxloss), ("maxorders", r.maxorders))
            if v is not None
        ]
        if risk:
            head.append("RISK " + " ".join(risk))
        return "\n".join([" ".join(head)] + [rule(x) for x in s.rules])
    if isinstance(s, View):
        text = f"VIEW {s.name}: " + ", ".join(_pane(p) for p in s.panes)
        return text + (f" BUDGET {s.budget}" if s.budget is not None else "")
    if isinstance(s, StandDown):
        return "STANDDOWN" + (f" {_string(s.reason)}" if s.reason is not None else "")
    if isinstance(s, Pass):
        return "PASS"
    raise LangError([Diagnostic("not-statement", f"cannot format {type(s).__name__}")])


def format_ast(node: Module | Statement) -> str:
    """Canonical text of a document, ending with a newline."""
    try:
        if isinstance(node, Module):
            return "\n\n".join(statement(s) for s in node.statements) + "\n"
        return statement(node) + "\n"
    except RecursionError:
        raise LangError([Diagnostic("too-deep", "AST nested too deeply to format")]) from None


format = format_ast  # noqa: A001 - the public name the issue asks for

__all__ = ["expr", "format", "format_ast", "has_inner_comments", "num", "split_header"]


_STRING = re.compile(r'"(?:[^"\\\r\n]|\\["\\])*"')


def split_header(text: str) -> tuple[str, str]:
    """Split off the leading block of `#` comment lines (and blank lines between them):
    the part `fmt` keeps verbatim above the canonical text."""
    lines = text.split("\n")
    n = 0
    while n < len(lines) and (lines[n].lstrip().startswith("#") or not lines[n].strip()):
        n += 1
    while n > 0 and not lines[n - 1].strip():
        n -= 1
    return "\n".join(lines[:n]), "\n".join(lines[n:])


def inner_comment_lines(text: str) -> list[int]:
    """The 1-based lines of `#` comments after the leading comment block (outside strings):
    such comments are not part of the AST and would be lost by reformatting."""
    header, body = split_header(text)
    first = header.count("\n") + 1 if header else 0
    return [first + k + 1 for k, line in enumerate(body.split("\n")) if "#" in _STRING.sub("", line)]


def has_inner_comments(text: str) -> bool:
    """True when `text` has a `#` comment after its leading comment block (see
    `inner_comment_lines`)."""
    return bool(inner_comment_lines(text))

