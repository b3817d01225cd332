"""The grammar, `kestrel.lark`: the one source of the language's syntax and terminals.

lark compiles it with `OPTIONS` (LALR(1), contextual lexer, `re.ASCII`: `\\b`, case folding
and character classes are ASCII-only, so `ſ` is not an `s` and `planè` is PLAN + an error).
The driver (`lalr`) runs lark's tables; the lexer (`lexer`) derives its patterns from the
compiled terminals. `compile_grammar()` is the stock lark parser the differential tests and
the benchmark compare against.
"""

from __future__ import annotations

import re
import threading
from importlib import resources
from typing import Any, Final

from lark import Lark, Transformer

GRAMMAR: Final[str] = resources.files("kestrel.lang").joinpath("kestrel.lark").read_text("utf-8")

OPTIONS: Final[dict[str, Any]] = {
    "parser": "lalr",
    "lexer": "contextual",
    "maybe_placeholders": True,
    "g_regex_flags": re.ASCII,
}

# lark's grammar loader keeps module-level state (its own cached grammar parser) that it
# does not promise to share safely: grammars are compiled one at a time.
_LOCK = threading.Lock()


def compile_grammar(transformer: Transformer[Any, Any] | None = None) -> Lark:
    """lark's LALR parser for `GRAMMAR`; with a transformer, its reductions call it."""
    with _LOCK:
        return Lark(GRAMMAR, transformer=transformer, **OPTIONS)


__all__ = ["GRAMMAR", "OPTIONS", "compile_grammar"]
