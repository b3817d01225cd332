"""Blind aliases: fixed by the set of symbols (any order in, the same aliases out), numbered by a
salted digest and not by the alphabet, and every list the agent reads in alias order."""

from __future__ import annotations

import hashlib
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.frame.blind import ALIAS_SALT, alias_order

DOW20 = ("AAPL AMGN AMZN AXP BA CAT CRM CSCO CVX DIS GS HD HON IBM JNJ JPM KO MCD MMM MRK").split()


def test_the_dow20_aliases_do_not_follow_the_alphabet() -> None:
    aliases = alias_order(DOW20)
    by_number = sorted(aliases, key=lambda s: int(aliases[s][3:]))
    assert by_number != sorted(DOW20)
    decoded = sum(aliases[s] == f"SYM{i}" for i, s in enumerate(sorted(DOW20), 1))
    assert decoded <= 3, aliases  # the alphabetical guess decodes next to nothing
    assert sorted(aliases.values(), key=lambda a: int(a[3:])) == [f"SYM{i}" for i in range(1, 21)]


def test_an_alias_is_the_rank_of_the_salted_digest() -> None:
    """By hand: the symbol with the smallest SHA-256 of salt + symbol is SYM1."""
    digests = {s: hashlib.sha256(f"{ALIAS_SALT}{s}".encode()).hexdigest() for s in DOW20}
    first = min(DOW20, key=lambda s: digests[s])
    last = max(DOW20, key=lambda s: digests[s])
    aliases = alias_order(DOW20)
    assert aliases[first] == "SYM1" and aliases[last] == "SYM20"


def test_one_symbol_is_sym1() -> None:
    assert alias_order(["AAPL"]) == {"AAPL": "SYM1"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(string.ascii_uppercase, min_size=1, max_size=5), min_size=1, max_size=12, unique=True),
       st.randoms(use_true_random=False))
def test_the_same_symbols_in_any_order_get_the_same_aliases(symbols: list[str], rnd: object) -> None:
    shuffled = list(symbols)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert alias_order(symbols) == alias_order(shuffled)
    assert sorted(int(a[3:]) for a in alias_order(symbols).values()) == list(range(1, len(symbols) + 1))
