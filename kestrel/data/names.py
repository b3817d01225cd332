"""The names table shipped with the data: symbol -> the words that name it (company names,
short names, brands), read from `names.toml` in this package. Blind mode masks them in news.

Invariants: symbols are upper-case; each symbol's names are non-empty strings, without the
symbol itself (which is always masked); `names_of` returns () for a symbol the table lacks.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from types import MappingProxyType
from collections.abc import Mapping


@cache
def names_table() -> Mapping[str, tuple[str, ...]]:
    """The shipped table (read once)."""
    raw = tomllib.loads(files("kestrel.data").joinpath("names.toml").read_text(encoding="utf-8"))
    out: dict[str, tuple[str, ...]] = {}
    for symbol, row in raw.items():
        names = tuple(n for n in row.get("names", ()) if isinstance(n, str) and n.strip())
        out[symbol.upper()] = tuple(n for n in names if n.upper() != symbol.upper())
    return MappingProxyType(out)


def names_of(symbol: str) -> tuple[str, ...]:
    """The names of `symbol` in the shipped table (() when it has none)."""
    return names_table().get(symbol.upper(), ())


__all__ = ["names_of", "names_table"]
