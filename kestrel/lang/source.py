"""Source documents: the canonical text of a file as `kestrel fmt` writes it (above both the
parser and the formatter, so neither imports the other)."""

from __future__ import annotations

from kestrel.lang.formatter import format_ast, split_header
from kestrel.lang.limits import Limits
from kestrel.lang.parser import parse


FORMAT_LOT = 1e-9
"""The lot a document is formatted under: the finest there is, so a quantity of any instrument
formats (its lot is checked where the plan meets the instrument)."""


def format_source(text: str, limits: Limits | None = None) -> str:
    """Canonical text of a source document: its leading comment block (trailing spaces
    trimmed) followed by `format(parse(text))`, quantities checked against no particular lot
    (`FORMAT_LOT`). Raises LangError for an invalid document."""
    text = text.removeprefix("\ufeff")  # a byte-order mark is not part of the header
    header, _ = split_header(text)
    canonical = format_ast(parse(text, limits, lot=FORMAT_LOT))
    if not header:
        return canonical
    return "\n".join(line.rstrip() for line in header.split("\n")) + "\n" + canonical


__all__ = ["format_source"]
