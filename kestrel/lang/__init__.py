"""The Kestrel language: parse, check and format trading plans.

`parse(text)` returns a checked AST or raises `LangError` (a ValueError) whose `str()` is the
repair text for the author; `check(ast)` checks an AST built in code; `format(ast)` gives the
canonical text, with `parse(format(a)) == a`.
"""

from kestrel.lang.ast import *  # noqa: F403
from kestrel.lang.ast import __all__ as _ast_all
from kestrel.lang.checker import check
from kestrel.lang.errors import Diagnostic, KestrelSyntaxError, LangError
from kestrel.lang.formatter import format, format_ast
from kestrel.lang.limits import DEFAULT_LIMITS, Limits
from kestrel.lang.parser import parse
from kestrel.lang.source import format_source
from kestrel.lang.summary import GRAMMAR_SUMMARY

__all__ = [
    "DEFAULT_LIMITS",
    "GRAMMAR_SUMMARY",
    "Diagnostic",
    "KestrelSyntaxError",
    "LangError",
    "Limits",
    "check",
    "format",
    "format_ast",
    "format_source",
    "parse",
    *_ast_all,
]
