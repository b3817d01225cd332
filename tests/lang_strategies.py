"""Hypothesis strategies for valid Kestrel ASTs (reusable by every engineer).

`plans()` gives random valid `Plan`s, `statements()` any valid Statement, `documents()` a
Statement or a Module of 2-4 statements with distinct plan names. Every generated value
passes `check` with default limits; the strategies are typed by construction (a Price
expression is built only from Price parts) and filtered by `check` as a last safety net.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st

from kestrel.lang.limits import VIEW_BUDGET_MAX, VIEW_BUDGET_MIN
from kestrel.lang import (
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
    check,
    format,
)

PRICE_SERIES = ("last", "bid", "ask", "mid", "spread", "vwap", "open")
QTY_SERIES = ("size", "vol", "pos")
MONEY_SERIES = ("upnl", "rpnl", "pnl")

names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
symbols = st.from_regex(r"[A-Z][A-Z0-9.]{0,5}", fullmatch=True)


def _round(places: int) -> st.SearchStrategy[float]:
    return st.integers(-(10**7), 10**7).map(lambda i: i / 10**places)


prices = st.integers(1, 10**6).map(lambda i: i / 100)  # 0.01 .. 10000.00, positive
signed_numbers = st.one_of(_round(2), _round(0), st.floats(-1e6, 1e6, allow_nan=False))
pct_values = st.integers(1, 9999).map(lambda i: i / 100)  # 0.01 .. 99.99
counts = st.integers(1, 200).map(float)
windows = st.one_of(
    st.builds(Duration, st.integers(1, 3600), st.just("s")),
    st.builds(Duration, st.integers(1, 600), st.just("m")),
    st.builds(Duration, st.integers(1, 48), st.just("h")),
    st.builds(Duration, st.integers(1, 5), st.just("d")),
)
timeframes = st.one_of(
    st.builds(Duration, st.sampled_from([1, 5, 10, 15, 30]), st.just("s")),
    st.builds(Duration, st.sampled_from([1, 2, 5, 15, 30]), st.just("m")),
    st.builds(Duration, st.sampled_from([1, 2]), st.just("h")),
)
times = st.builds(TimeOfDay, st.integers(0, 23), st.integers(0, 59), st.sampled_from([0, 0, 30]))


@lru_cache(maxsize=None)
def price_expr(depth: int = 2) -> st.SearchStrategy[Expr]:
    leaves: list[st.SearchStrategy[Expr]] = [
        st.sampled_from(PRICE_SERIES).map(Series),
        prices.map(Number),
        st.builds(Call, st.sampled_from(["high", "low", "range"]), st.tuples(windows)),
        st.builds(
            Call,
            st.sampled_from(["sma", "ema"]),
            st.one_of(
                st.tuples(st.sampled_from(PRICE_SERIES).map(Series), counts.map(Number)),
                st.tuples(
                    st.sampled_from(PRICE_SERIES).map(Series),
                    st.integers(1, 50).map(lambda n: Number(float(n))),
                    timeframes,
                ),
            ),
        ),
        st.builds(
            Call,
            st.just("atr"),
            st.one_of(
                st.tuples(counts.map(Number)),
                st.tuples(st.integers(1, 50).map(lambda n: Number(float(n))), timeframes),
            ),
        ),
    ]
    base = st.one_of(*leaves)
    if depth <= 0:
        return base
    sub = price_expr(depth - 1)
    return st.one_of(
        base,
        st.builds(Arith, st.sampled_from(["+", "-"]), sub, st.one_of(sub, signed_numbers.map(Number))),
        st.builds(Arith, st.just("*"), sub, signed_numbers.map(Number)),
        st.builds(Arith, st.just("*"), signed_numbers.map(Number), sub),
        st.builds(Arith, st.just("/"), sub, prices.map(Number)),
        st.builds(Neg, sub),
    )


@lru_cache(maxsize=None)
def _typed_pair() -> st.SearchStrategy[tuple[Expr, Expr]]:
    pct = st.one_of(
        pct_values.map(Percent),
        pct_values.map(lambda v: Percent(-v)),
        st.builds(Call, st.just("chg"), st.tuples(windows)),
    )
    qty = st.one_of(st.sampled_from(QTY_SERIES).map(Series), signed_numbers.map(Number))
    money = st.one_of(st.sampled_from(MONEY_SERIES).map(Series), signed_numbers.map(Number))
    return st.one_of(
        st.tuples(price_expr(), price_expr()),
        st.tuples(pct, pct),
        st.tuples(st.sampled_from(QTY_SERIES).map(Series), qty),
        st.tuples(st.sampled_from(MONEY_SERIES).map(Series), money),
    )


@lru_cache(maxsize=None)
def bool_expr(depth: int = 2) -> st.SearchStrategy[Expr]:
    ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    base = st.one_of(
        st.builds(lambda op, p: Compare(op, p[0], p[1]), ops, _typed_pair()),
        st.builds(lambda op, t: Compare(op, Series("time"), t), ops, times),
        st.builds(Crosses, st.sampled_from(["above", "below"]), price_expr(1), price_expr(1)),
    )
    if depth <= 0:
        return base
    sub = bool_expr(depth - 1)
    return st.one_of(
        base,
        st.builds(Not, sub),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
    )


def _offset(side: str, kind: str, entry: float | None) -> st.SearchStrategy[Offset | None]:
    below = (kind == "stop") == (side == "buy")
    rel = st.one_of(
        pct_values.map(lambda v: Offset("pct", -v if below else v)),
        prices.map(lambda v: Offset("abs", -v if below else v)),
    )
    options: list[st.SearchStrategy[Offset | None]] = [st.none(), rel]
    if entry is None:
        options.append(prices.map(lambda v: Offset("at", v)))
    else:
        frac = st.integers(1, 99).map(lambda i: i / 100)
        if below:
            options.append(frac.map(lambda f: Offset("at", entry * f)))
        else:
            options.append(frac.map(lambda f: Offset("at", entry * (1 + f))))
    return st.one_of(*options)


@st.composite
def orders(draw: st.DrawFn, maxpos: int | None = None) -> Order:
    side = draw(st.sampled_from(["buy", "sell"]))
    qty = draw(st.integers(1, maxpos if maxpos is not None else 10_000))
    order_type = draw(st.sampled_from(["mkt", "lmt", "stp"]))
    price: Expr | None = None
    entry: float | None = None
    if order_type != "mkt":
        price = draw(st.one_of(prices.map(Number), price_expr(1)))
        entry = price.value if isinstance(price, Number) else None
    stop = draw(_offset(side, "stop", entry))
    target = draw(_offset(side, "target", entry))
    if stop is not None and target is not None and stop.mode == target.mode == "at":
        target = None
    trail = draw(
        st.one_of(
            st.none(),
            pct_values.map(lambda v: Offset("pct", v)),
            prices.map(lambda v: Offset("abs", v)),
        )
    )
    ttl = draw(st.one_of(st.none(), windows))
    return Order(side, qty, order_type, price, stop, target, trail, ttl)  # type: ignore[arg-type]


@lru_cache(maxsize=None)
def actions(maxpos: int | None) -> st.SearchStrategy[Order | Flat | Cancel]:
    return st.one_of(orders(maxpos), st.just(Flat()), st.just(Cancel()))


@st.composite
def plans(draw: st.DrawFn, name: str | None = None) -> Plan:
    risk = Risk(
        draw(st.one_of(st.none(), st.integers(1, 10_000))),
        draw(st.one_of(st.none(), st.integers(1, 10**6).map(lambda i: i / 10))),
        draw(st.one_of(st.none(), st.integers(1, 100))),
    )
    rules = draw(
        st.lists(
            st.builds(
                Rule,
                bool_expr(),
                st.lists(actions(risk.maxpos), min_size=1, max_size=3).map(tuple),
                st.one_of(st.just(1), st.integers(1, 100)),
            ),
            min_size=1,
            max_size=4,
        )
    )
    expiry = draw(st.one_of(st.none(), times.map(Until), windows.map(For)))
    return Plan(
        name if name is not None else draw(names),
        tuple(rules),
        draw(st.one_of(st.none(), symbols)),
        expiry,
        risk,
    )


pane_values = st.one_of(
    signed_numbers.map(Number),
    pct_values.map(Percent),
    pct_values.map(lambda v: Percent(-v)),
    windows,
    times,
    names.map(Ident),
)


@st.composite
def panes(draw: st.DrawFn) -> PaneRef:
    positional = draw(st.lists(pane_values.map(PaneArg), max_size=3))
    keys = draw(st.lists(names, max_size=3, unique=True))
    named = [PaneArg(draw(pane_values), k) for k in keys]
    return PaneRef(draw(names), tuple(positional + named))


views = st.builds(
    View,
    names,
    st.lists(panes(), min_size=1, max_size=4).map(tuple),
    st.one_of(st.none(), st.integers(VIEW_BUDGET_MIN, VIEW_BUDGET_MAX)),
)
reasons = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60
).filter(str.isprintable)
standdowns = st.builds(StandDown, st.one_of(st.none(), reasons))


def statements() -> st.SearchStrategy[Statement]:
    return st.one_of(plans(), views, standdowns, st.just(Pass()))


@st.composite
def modules(draw: st.DrawFn) -> Module:
    stmts = draw(st.lists(statements(), min_size=2, max_size=4))
    seen: set[str] = set()
    out: list[Statement] = []
    for s in stmts:
        if isinstance(s, Plan):
            if s.name in seen:
                continue
            seen.add(s.name)
        out.append(s)
    if len(out) < 2:
        out.append(Pass())
    return Module(tuple(out))


def _valid(doc: Module | Statement) -> bool:
    return not check(doc)


documents: st.SearchStrategy[Module | Statement] = st.one_of(statements(), modules()).filter(
    _valid
)
valid_plans: st.SearchStrategy[Plan] = plans().filter(_valid)


# ---- broken and half-broken text (for fuzzing and differential tests)

CORPUS = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.kes"))

# fragments a mutation inserts: keywords, near-keywords, literals valid and not, punctuation,
# characters the lexer must reject (non-ASCII letters, NUL, a Unicode line separator)
VOCAB = [
    "PLAN", "WHEN", "BUY", "SELL", "MKT", "LMT", "STP", "STOP", "TARGET", "TRAIL", "TTL", "FLAT",
    "CANCEL", "AND", "OR", "NOT", "CROSSES", "ABOVE", "VIEW", "PASS", "STANDDOWN", "RISK", "ON",
    "UNTIL", "FOR", "maxpos", "x3", "last", "high(", "sma(", ")", "(", ":", ";", ",", "-", "+",
    "*", "/", "@", ">", "==", "30m", "0m", "15:45", "99:99", "0.6%", "1e9", "1.5h", "\"", "#",
    "\n", " ", "\u00e9", "\x00", "9" * 40, "\u2028", "=", "&&",
]

# whole tokens (and near-tokens) for token soups: each soup reaches deep parser states
TOKENS = [
    *VOCAB, "plan", "when", "buy", "Market", "limit", "BRK.B", "AAPL", "aapl", "x12", "X3", "xx3",
    "planet", "pass_", "30s", "2h", "1d", "5x", "182.40", "0.05", "1.", ".5", "1.2.3", "7%",
    "9:30:15", "24:00", "\"why\"", "\"a \\\" b\"", "BUDGET", "maxloss", "maxorders", "BELOW",
    "<=", "!=", "<", "paſs", "planè", "ＰＬＡＮ", "_x", "upnl", "vwap", "spread", "n=", "tf=",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A corpus file or a formatted valid document with 1-4 random edits."""
    base = draw(st.one_of(st.sampled_from(CORPUS).map(lambda p: p.read_text()), documents.map(format)))
    for _ in range(draw(st.integers(1, 4))):
        if not base:
            break
        i = draw(st.integers(0, len(base) - 1))
        op = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        if op == "delete":
            j = draw(st.integers(i, min(len(base), i + 12)))
            base = base[:i] + base[j:]
        elif op == "insert":
            base = base[:i] + draw(st.sampled_from(VOCAB)) + base[i:]
        elif op == "replace":
            base = base[:i] + draw(st.sampled_from(VOCAB)) + base[i + 1 :]
        else:
            j = draw(st.integers(i, min(len(base), i + 30)))
            base = base[:j] + base[i:j] + base[j:]
    return base


token_soups: st.SearchStrategy[str] = st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join)


__all__ = [
    "CORPUS",
    "TOKENS",
    "VOCAB",
    "bool_expr",
    "documents",
    "modules",
    "mutated",
    "orders",
    "plans",
    "price_expr",
    "statements",
    "token_soups",
    "valid_plans",
    "views",
]
