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
    SymbolRead,
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


def _prec(node: Expr) -> int:
    if isinstance(node, Or):
        return _OR
    if isinstance(node, And):
        return _AND
    if isinstance(node, Not):
        return _NOT
    if isinstance(node, (Compare, Crosses)):
        return _CMP
    if isinstance(node, Arith):
        return _SUM if node.op in "+-" else _PROD
    if isinstance(node, Neg):
        return _UNARY
    if isinstance(node, (Number, Percent)) and node.value < 0:
        return _UNARY
    return _ATOM


def _wrap(node: Expr, min_prec: int) -> str:
    text = expr(node)
    return f"({text})" if _prec(node) < min_prec else text


def expr(node: Expr) -> str:
    """Format one expression."""
    if isinstance(node, Number):
        return num(node.value)
    if isinstance(node, Percent):
        return f"{num(node.value)}%"
    if isinstance(node, Duration):
        return f"{node.value}{node.unit}"
    if isinstance(node, TimeOfDay):
        return tod(node)
    if isinstance(node, Series):
        return node.name
    if isinstance(node, Call):
        return f"{node.name}({','.join(_wrap(arg, _SUM) for arg in node.args)})"
    if isinstance(node, SymbolRead):
        return f"{node.symbol}.{expr(node.read)}"
    if isinstance(node, Neg):
        inner = node.operand
        # a bare literal after `-` would be folded into a negative literal: keep the Neg
        if isinstance(inner, (Number, Percent)):
            return f"-({expr(inner)})"
        return "-" + _wrap(inner, _UNARY)
    if isinstance(node, Arith):
        level = _SUM if node.op in "+-" else _PROD
        right = _wrap(node.right, level + 1)
        sep = " " if right.startswith("-") else ""  # `1- -5`, never `1--5`
        return f"{_wrap(node.left, level)}{node.op}{sep}{right}"
    if isinstance(node, Compare):
        return f"{_wrap(node.left, _SUM)} {node.op} {_wrap(node.right, _SUM)}"
    if isinstance(node, Crosses):
        return f"{_wrap(node.left, _SUM)} CROSSES {node.direction.upper()} {_wrap(node.right, _SUM)}"
    if isinstance(node, Not):
        return "NOT " + _wrap(node.operand, _NOT)
    if isinstance(node, And):
        return " AND ".join(_wrap(operand, _NOT) for operand in node.operands)
    if isinstance(node, Or):
        return " OR ".join(_wrap(operand, _AND) for operand in node.operands)
    raise LangError([Diagnostic("not-expression", f"cannot format {type(node).__name__}")])


def tod(clock: TimeOfDay) -> str:
    base = f"{clock.hour:02d}:{clock.minute:02d}"
    return base + (f":{clock.second:02d}" if clock.second else "")


def offset(off: Offset, signed: bool = True) -> str:
    if off.mode == "at":
        return f"@{num(off.value)}"
    sign = ("-" if off.value < 0 else "+") if signed else ""
    body = num(abs(off.value)) if signed else num(off.value)
    return f"{sign}{body}{'%' if off.mode == 'pct' else ''}"


def action(node: Order | Flat | Cancel) -> str:
    if isinstance(node, Flat):
        return "FLAT"
    if isinstance(node, Cancel):
        return "CANCEL"
    if node.size is not None:
        amount = num(node.size.value)
        quantity = f"${amount}" if node.size.basis == "cash" else f"{amount}%EQ"
    else:
        quantity = str(node.qty) if isinstance(node.qty, int) else num(node.qty)
    parts = [node.side.upper(), quantity, node.order_type.upper()]
    if node.price is not None:
        parts.append(_wrap(node.price, _SUM))
    if node.stop is not None:
        parts.append("STOP " + offset(node.stop))
    if node.target is not None:
        parts.append("TARGET " + offset(node.target))
    if node.trail is not None:
        parts.append("TRAIL " + offset(node.trail, signed=False))
    if node.ttl is not None:
        parts.append(f"TTL {node.ttl.value}{node.ttl.unit}")
    return " ".join(parts)


def rule(node: Rule) -> str:
    text = f"WHEN {expr(node.cond)}: " + "; ".join(action(act) for act in node.actions)
    return text + (f" x{node.repeat}" if node.repeat != 1 else "")


def _pane_arg(arg: PaneArg) -> str:
    value = arg.value
    text = value.name if isinstance(value, Ident) else expr(value)
    return f"{arg.name}={text}" if arg.name is not None else text


def _pane(pane: PaneRef) -> str:
    if not pane.args:
        return pane.name
    return f"{pane.name}({','.join(_pane_arg(arg) for arg in pane.args)})"


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def statement(node: Statement) -> str:
    if isinstance(node, Plan):
        head = [f"PLAN {node.name}"]
        if node.instrument is not None:
            head.append(f"ON {node.instrument}")
        if isinstance(node.expiry, Until):
            head.append(f"UNTIL {tod(node.expiry.at)}")
        elif isinstance(node.expiry, For):
            head.append(f"FOR {node.expiry.span.value}{node.expiry.span.unit}")
        bounds = node.risk
        risk = [
            f"{key} {value if isinstance(value, int) else num(value)}"
            for key, value in (("maxpos", bounds.maxpos), ("maxloss", bounds.maxloss), ("maxorders", bounds.maxorders))
            if value is not None
        ]
        if risk:
            head.append("RISK " + " ".join(risk))
        return "\n".join([" ".join(head)] + [rule(plan_rule) for plan_rule in node.rules])
    if isinstance(node, View):
        text = f"VIEW {node.name}: " + ", ".join(_pane(pane) for pane in node.panes)
        return text + (f" BUDGET {node.budget}" if node.budget is not None else "")
    if isinstance(node, StandDown):
        on = f" ON {node.instrument}" if node.instrument is not None else ""
        return "STANDDOWN" + on + (f" {_string(node.reason)}" if node.reason is not None else "")
    if isinstance(node, Pass):
        return "PASS"
    raise LangError([Diagnostic("not-statement", f"cannot format {type(node).__name__}")])


def format_ast(node: Module | Statement) -> str:
    """Canonical text of a document, ending with a newline."""
    try:
        if isinstance(node, Module):
            return "\n\n".join(statement(each) for each in node.statements) + "\n"
        return statement(node) + "\n"
    except RecursionError:
        raise LangError([Diagnostic("too-deep", "AST nested too deeply to format")]) from None


format = format_ast  # noqa: A001 - the public name of the package

__all__ = ["expr", "format", "format_ast", "has_inner_comments", "num", "split_header"]


_STRING = re.compile(r'"(?:[^"\\\r\n]|\\["\\])*"')


def split_header(text: str) -> tuple[str, str]:
    """Split off the leading block of `#` comment lines (and blank lines between them):
    the part `fmt` keeps verbatim above the canonical text."""
    lines = text.split("\n")
    count = 0
    while count < len(lines) and (lines[count].lstrip().startswith("#") or not lines[count].strip()):
        count += 1
    while count > 0 and not lines[count - 1].strip():
        count -= 1
    return "\n".join(lines[:count]), "\n".join(lines[count:])


def inner_comment_lines(text: str) -> list[int]:
    """The 1-based lines of `#` comments after the leading comment block (outside strings):
    such comments are not part of the AST and would be lost by reformatting."""
    header, body = split_header(text)
    first = header.count("\n") + 1 if header else 0
    return [first + index + 1 for index, line in enumerate(body.split("\n")) if "#" in _STRING.sub("", line)]


def has_inner_comments(text: str) -> bool:
    """True when `text` has a `#` comment after its leading comment block (see
    `inner_comment_lines`)."""
    return bool(inner_comment_lines(text))

