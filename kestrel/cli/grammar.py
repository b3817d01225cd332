"""`kestrel grammar`: print the reply grammar in a constrained decoder's dialect.

`--dialect llguidance` (default), `gbnf` or `ebnf` print the grammar derived from
`kestrel.lark` by `kestrel.lang.dialects` (one statement, or `--module` for a `.kes` file's
statements); `--dialect lark` prints `kestrel.lark` itself, the full language Kestrel's own
parser reads (lark features the decoders refuse). Exit codes: 0 printed, 1 the grammar cannot
be exported (a grammar change the export does not follow), 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys

from kestrel.cli.subcommands import Subcommands

_CHOICES = ("llguidance", "gbnf", "ebnf", "lark")


def _grammar(args: argparse.Namespace) -> int:
    from kestrel.lang.dialects import NotTranslatable, export
    from kestrel.lang.grammar import GRAMMAR

    if args.dialect == "lark":
        if args.module:
            print("kestrel grammar: --module applies to llguidance, gbnf and ebnf; kestrel.lark "
                  "(--dialect lark) always reads modules", file=sys.stderr)
            return 2
        sys.stdout.write(GRAMMAR)
        return 0
    try:
        text = export(args.dialect, module=args.module)
    except NotTranslatable as err:
        print(f"kestrel grammar: cannot export the grammar: {err}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser(
        "grammar",
        help="print the reply grammar for constrained decoding (LLGuidance Lark, GBNF, EBNF)",
        description=(
            "Print Kestrel's reply grammar for a constrained decoder. llguidance: the Lark subset "
            "of OpenAI custom tools (syntax \"lark\"), vLLM's guidance backend, llama.cpp's "
            "%llguidance and SGLang with LLGuidance; gbnf: llama.cpp's grammar field; ebnf: "
            "xgrammar (vLLM's and SGLang's default). Every document the exported grammar accepts "
            "passes Kestrel's syntax stage (see docs/language.md, Constrained decoding)."
        ),
    )
    p.add_argument("--dialect", choices=_CHOICES, default="llguidance",
                   help="the grammar dialect (default llguidance; lark prints kestrel.lark itself)")
    p.add_argument("--module", action="store_true",
                   help="accept several statements separated by a blank line, as a .kes file holds "
                        "(default: one statement, a reply)")
    p.set_defaults(func=_grammar)


__all__ = ["register"]
