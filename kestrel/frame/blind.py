"""Blind mode: what the agent reads, with the instrument's identity taken out.

A `Blind` is fixed once per run from the whole data (never from a snapshot), so every briefing
of the run uses the same mapping:

- **symbols** become stable aliases `SYM1..SYMn` numbered in the order of the SHA-256 digest of
  `ALIAS_SALT + symbol` (ties, never seen, by the symbol): an order fixed by the symbols alone
  (the same set of symbols gets the same aliases in every run, in any order given) and not their
  sort order, so an alias does not decode by the alphabet (`SYM1` for a single-symbol session; a
  universe's members, `of_universe`, each with its own price scale, the universe's sessions
  numbering the days);
- **dates** become session numbers: the session with index k of the data is day `d<k+1>`; an
  instant is labelled by its date's session (`d5+1` a day after session 5's date when no session
  is held on it) and keeps its time of day on the wall clock of the session it falls in; instants handed out as
  numbers (the typed snapshot) are `d * 86400 s` plus the UTC time of day (an epoch of
  1970-01-01 as day 0);
- **prices** are rescaled by `100 / p0`, `p0` the symbol's first price in the data, so its first
  price reads 100; the tick grid is rescaled with it (`blind tick = tick * 100 / p0`) and prices
  print with `decimals` digits, the fewest for which one printed step is smaller than a blind
  tick; **money** (PnL, fees, loss bounds) is rescaled by the same factor (a P&L is a quantity
  times a price move) and prints on the blind image of the cent;
- **volumes** (a session's or a bar's volume, a trade's size, the average volume) are rescaled
  per symbol by `1000 / v0`, `v0` the symbol's volume in the first session of the data that
  traded any (so that session's volume reads 1000; a symbol that never traded keeps its
  zeros), and print whole from 100 up, with at most 2 decimals below: the real volume, which fingerprints a stock and
  its day, never shows; relative volumes (`rvol`, `relvol`) are ratios and stay;
- **news text** has every name of the run's symbols in the names table, and the symbols
  themselves, replaced by the alias; names of other symbols in the table by `[company]`; dollar
  amounts by `$[n]`, years by `[year]`, whole dates by `[date]` (a month name with its day on
  either side, `12 March`, `March 12th`, `12th of March`, a month alone, an ordinal day `the
  12th`, an ISO date or instant `2025-03-12`, a numeric `3/12/2025`: no day of the month
  survives), and any other number that could be a price level (a decimal, or three digits or more, not a percentage) by `[n]`.

The mapping back (`plan_from_blind`) is exact: a price literal of a plan written in the blind
scale becomes `round(value / blind_tick)` ticks of the real grid (the nearest real tick, so a
price copied from a briefing maps back to the very price it shows), a money bound
`round(value / blind_cent)` real cents, a plan's `ON` alias the real symbol. Which literals are
prices follows the language's types: an order price, an `@price` or absolute bracket offset, and
a number compared with, added to or subtracted from a price (money likewise: a number compared
with `pnl`, `upnl` or `rpnl`, and `RISK maxloss`); multipliers (`vwap * 1.005`),
percentages, quantities, counts and durations are not prices and are left as written. Over a
universe a cross-symbol read names an alias (`SYM2.chg(1d)`) and maps back to the real member; a
number compared with another member's price (`SYM2.last > 104.5`) is on that member's scale; an
order sized by money (`BUY $500 MKT`) is an amount in the plan's symbol's money scale (so `$500`
at a blind price of 100 is 5 units, as it reads), a share of equity (`10%EQ`) is scale-free and
left as written; `STANDDOWN ON SYM2` names the real member. The engine,
ledgers and reports only ever see real values.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import msgspec
import numpy as np

from kestrel.lang import ast
from kestrel.lang.registry import FUNCTIONS, SERIES
from kestrel.market.account import AccountState, Notice
from kestrel.market.data import MarketData
from kestrel.market.instrument import decimals_for
from kestrel.market.session import SessionSpec
from kestrel.market.terms import Terms
from kestrel.market.ticks import I64, NS_PER_S
from kestrel.market.universe import Universe

DAY_NS = 86_400 * NS_PER_S
CENT = Fraction(1, 100)
BLIND_FIRST_VOLUME = 1000
ALIAS_PREFIX = "SYM"
ALIAS_SALT = "kestrel-blind-alias-v1:"
OTHER_COMPANY = "[company]"

_MONEY = re.compile(r"(?:US)?\$\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKmMbB]n?|trillion|billion|million|thousand)\b)?")
_YEAR = re.compile(r"\b(?:1[89]|2[0-9])\d{2}\b")
_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?"
           r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b\.?")
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?\b"
_DATE = re.compile(
    r"\b\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"  # ISO
    r"|\b(?:0?[1-9]|1[0-2])/(?:[12]\d|3[01]|0?[1-9])(?:/\d{2,4})?\b"  # 3/12, 03/12/2025
    rf"|\b{_DAY}(?:\s+of)?\s+{_MONTHS}"  # 12 March, 12th of March
    rf"|\b{_MONTHS}(?:\s+{_DAY})?"  # March 12, March 12th, March
    r"|\b(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)\b",  # the 12th
)
_POSSESSIVE = r"(?:['’]s)?"
_DECIMAL = re.compile(r"(?<![\w.$\[])\d+\.\d+(?!\d*\s?%)")
_NUMBER = re.compile(r"(?<![\w.$\[])\d[\d,]*(?:\.\d+)?(?:\s?%)?")


def _level(m: re.Match[str]) -> str:
    """A number that could be a price level (a decimal, or 3+ digits; not a percentage) as `[n]`."""
    text = m.group(0)
    if text.endswith("%"):
        return text
    digits = sum(c.isdigit() for c in text)
    return "[n]" if "." in text or digits >= 3 else text


def _exact(x: float) -> Fraction:
    """A decimal-looking float as the decimal it prints as (0.01 is 1/100, not its binary)."""
    return Fraction(repr(float(x)))


def _volume_factor(d: MarketData) -> float:
    """`BLIND_FIRST_VOLUME / v0`, `v0` the volume of the first session of `d` that traded (1.0
    when none did: zeros reveal nothing)."""
    for open_ns, close_ns in zip(d.session_open_ns, d.session_close_ns):
        v0 = float(np.sum(d.ticks.between(int(open_ns), int(close_ns) + 1).size))
        if v0 > 0:
            return BLIND_FIRST_VOLUME / v0
    return 1.0


def alias_order(symbols: Sequence[str]) -> dict[str, str]:
    """Each symbol's alias: `SYM<k>`, `k` its rank by the SHA-256 digest of `ALIAS_SALT + symbol`
    (then the symbol): fixed by the set of symbols, whatever order they come in."""
    ranked = sorted(dict.fromkeys(symbols),
                    key=lambda s: (hashlib.sha256((ALIAS_SALT + s).encode("utf-8")).hexdigest(), s))
    return {s: f"{ALIAS_PREFIX}{k}" for k, s in enumerate(ranked, 1)}


def blind_decimals(step: Fraction) -> int:
    """The fewest decimals whose printed step `10**-d` is smaller than `step`."""
    d = 0
    while Fraction(1, 10**d) >= step and d < 12:
        d += 1
    return d


@dataclass(frozen=True, slots=True)
class Scale:
    """A real grid of `unit` shown at `factor` times its values (see the module docstring)."""

    unit: Fraction
    factor: Fraction
    decimals: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decimals", blind_decimals(self.unit * self.factor))

    @property
    def blind_unit(self) -> float:
        return float(self.unit * self.factor)

    def value(self, real: float) -> float:
        """`real` in the blind scale, rounded as it prints."""
        return round(float(real) * float(self.factor), self.decimals)

    def text(self, real: float) -> str:
        if not math.isfinite(real):
            return "n/a"
        return f"{float(real) * float(self.factor):.{self.decimals}f}"

    def back(self, blind: float) -> float:
        """The real value on the grid nearest `blind / factor` (exact: a whole number of units)."""
        units = round(_exact(blind) / (self.unit * self.factor))
        real = units * self.unit
        return float(f"{float(real):.{decimals_for(float(self.unit))}f}")


@dataclass(frozen=True, slots=True)
class Blind:
    """The run's blind mapping (see the module docstring)."""

    aliases: Mapping[str, str]
    prices: Mapping[str, Scale]
    money: Mapping[str, Scale]
    session_open_ns: I64
    session_days_ns: I64
    session_offset_ns: I64
    masks: tuple[tuple[re.Pattern[str], str], ...] = ()
    volumes: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of_universe(cls, universe: Universe, names: Mapping[str, Sequence[str]] | None = None) -> Blind:
        """The mapping of a run over a universe: each member's alias by `alias_order`, each member's prices scaled by its own first raw price, the universe's sessions number
        the days (a member's missing session keeps its number)."""
        return cls.of([m.data for m in universe.members], names, universe.sessions)

    @classmethod
    def of(cls, data: Sequence[MarketData], names: Mapping[str, Sequence[str]] | None = None,
           sessions: Sequence[SessionSpec] | None = None) -> Blind:
        """The mapping of a run over `data` (one entry per symbol; `sessions`, default the
        first's, number the days). `names` is the names table (symbol -> names); its other
        symbols' names are masked as `[company]`."""
        if not data:
            raise ValueError("blind mode needs the run's market data")
        aliases = alias_order([d.symbol for d in data])
        prices: dict[str, Scale] = {}
        money: dict[str, Scale] = {}
        volumes: dict[str, float] = {}
        for d in data:
            if len(d.ticks) == 0:
                raise ValueError(f"blind mode needs a first price for {d.symbol}: the data has no ticks")
            p0 = _exact(round(float(d.ticks.last[0]), d.price_decimals))
            if p0 <= 0:
                raise ValueError(f"blind mode needs a positive first price for {d.symbol}, got {float(p0)}")
            factor = Fraction(100) / p0
            prices[d.symbol] = Scale(_exact(d.tick_size), factor)
            money[d.symbol] = Scale(CENT, factor)
            volumes[d.symbol] = _volume_factor(d)
        table = dict(names or {})
        words: list[tuple[str, str]] = []
        for sym, alias in aliases.items():
            words += [(n, alias) for n in (*table.get(sym, ()), sym)]
        for sym, others in table.items():
            if sym not in aliases:
                words += [(n, OTHER_COMPANY) for n in (*others, sym)]
        words.sort(key=lambda w: (-len(w[0]), w[0]))
        masks = tuple((re.compile(rf"(?<![\w$]){re.escape(w)}{_POSSESSIVE}(?!\w)", re.IGNORECASE if
                                  len(w) > 3 and not w.isupper() else 0), repl) for w, repl in words)
        numbered = tuple(data[0].sessions if sessions is None else sessions)
        days = np.array([int(np.datetime64(s.date, "D").astype(np.int64)) * DAY_NS for s in numbered],
                        dtype=np.int64)
        opens = np.array([s.open_ns for s in numbered], dtype=np.int64)
        offsets = np.array([s.utc_offset_ns for s in numbered], dtype=np.int64)
        return cls(aliases, prices, money, opens, days, offsets, masks, volumes)

    # ------------------------------------------------------------------------------------
    # identity

    def alias(self, symbol: str) -> str:
        return self.aliases.get(symbol, symbol)

    def shown_order(self, symbols: Sequence[str]) -> list[str]:
        """`symbols` in the order the agent reads them: by alias number (`SYM1` first), so no
        list or table of the briefing follows the real symbols' order."""
        def number(s: str) -> int:
            a = self.aliases.get(s, "")
            return int(a[len(ALIAS_PREFIX):]) if a[len(ALIAS_PREFIX):].isdigit() else len(self.aliases) + 1
        return sorted(symbols, key=lambda s: (number(s), s))

    def real_symbol(self, word: str) -> str | None:
        """The real symbol an alias (or the real symbol) names; None for neither."""
        for real, alias in self.aliases.items():
            if word.upper() in (alias, real):
                return real
        return None

    # ------------------------------------------------------------------------------------
    # time

    def session_number(self, ts_ns: int) -> int:
        """1 + the index of the session `ts_ns` falls in (0 before the first)."""
        return int(np.searchsorted(self.session_open_ns, ts_ns, side="right"))

    def day(self, ts_ns: int) -> str:
        """`d<k>`: the number of the session held on the instant's date (on the wall clock of
        the session it falls in); a date without a session is the last session's before it
        plus its distance in days (`d5+1`, `d5+2`), a date before the first `d1-1`, ..."""
        days = self.session_days_ns // DAY_NS
        if len(days) == 0:
            return "d0"
        off = int(self.session_offset_ns[max(self.session_number(ts_ns) - 1, 0)])
        local = (ts_ns + off) // DAY_NS
        k = int(np.searchsorted(days, local, side="right")) - 1
        if k < 0:
            return f"d1-{int(days[0]) - local}"
        extra = local - int(days[k])
        return f"d{k + 1}" + (f"+{extra}" if extra else "")

    def session_label(self, index: int) -> str:
        return f"d{index + 1}"

    def instant(self, ts_ns: int) -> int:
        """`ts_ns` as a blind instant: its session number in days plus its UTC time of day."""
        k = self.session_number(ts_ns)
        base = int(self.session_days_ns[max(k - 1, 0)]) if len(self.session_days_ns) else 0
        return k * DAY_NS + (ts_ns - base)

    # ------------------------------------------------------------------------------------
    # prices and money

    def price(self, symbol: str) -> Scale:
        return self.prices[symbol]

    def price_text(self, symbol: str, real: float) -> str:
        return self.prices[symbol].text(real)

    def money_text(self, symbol: str, real: float, signed: bool = False) -> str:
        s = self.money[symbol]
        if not math.isfinite(real):
            return "n/a"
        v = float(real) * float(s.factor)
        if signed:
            v = 0.0 if round(v, s.decimals) == 0 else v
            return f"{v:+.{s.decimals}f}"
        return f"{v:.{s.decimals}f}"

    def volume(self, symbol: str, real: float) -> float:
        """A volume or trade size of `symbol` as the agent reads it (see the module docstring)."""
        if not math.isfinite(real):
            return real
        v = float(real) * self.volumes.get(symbol, 1.0)
        return float(round(v)) if abs(v) >= 100 else round(v, 2)

    def account(self, a: AccountState, symbol: str) -> AccountState:
        """The account as the agent reads it: entry, order prices and money rescaled."""
        p, m = self.prices[symbol], self.money[symbol]
        orders = tuple(msgspec.structs.replace(o, price=p.value(o.price) if o.price is not None else None)
                       for o in a.orders)
        return msgspec.structs.replace(
            a, avg_entry=p.value(a.avg_entry) if a.avg_entry is not None else None, upnl=m.value(a.upnl),
            rpnl=m.value(a.rpnl), fees=m.value(a.fees), orders=orders)

    def terms(self, t: Terms, symbol: str) -> Terms:
        """The terms as the agent reads them: loss bounds and fees rescaled."""
        m = self.money[symbol]
        b, f = t.bounds, t.friction
        bounds = msgspec.structs.replace(
            b, maxloss=m.value(b.maxloss),
            session_maxloss=m.value(b.session_maxloss) if b.session_maxloss is not None else None)
        friction = msgspec.structs.replace(f, fee_per_unit=m.value(f.fee_per_unit), fee_per_order=m.value(f.fee_per_order))
        return Terms(bounds=bounds, friction=friction)

    def notice(self, n: Notice) -> Notice:
        return msgspec.structs.replace(n, ts=self.instant(n.ts), plan=self.mask_reason(n.plan),
                                       reason=self.mask_reason(n.reason))

    def mask_reason(self, text: str) -> str:
        """A broker's reason as the agent reads it: names masked, decimals (prices) as `[n]`;
        whole numbers (quantities, bounds) kept."""
        for pattern, repl in self.masks:
            text = pattern.sub(repl, text)
        return _DECIMAL.sub("[n]", text)

    # ------------------------------------------------------------------------------------
    # text

    def mask(self, text: str) -> str:
        """News text with names, tickers, dates, dollar amounts, years and price levels masked."""
        if not text:
            return text
        for pattern, repl in self.masks:
            text = pattern.sub(repl, text)
        text = _DATE.sub("[date]", text)
        text = _MONEY.sub("$[n]", text)
        text = _YEAR.sub("[year]", text)
        return _NUMBER.sub(_level, text)

    # ------------------------------------------------------------------------------------
    # plans

    def plan_to_blind(self, plan: ast.Plan, symbol: str) -> ast.Plan:
        """`plan` (real values, real symbols) as the agent should read it (blind values, aliases;
        a cross-symbol read's literals in its own symbol's scale)."""

        def scales(kind: str, other: str | None) -> Callable[[float], float]:
            sym = (self.real_symbol(other) or other) if other is not None else symbol
            scale = self.prices[sym] if kind == "Price" else self.money[sym]
            return scale.value

        return _map_plan(plan, scales, self.alias)

    def plan_from_blind(self, plan: ast.Plan, symbol: str) -> ast.Plan:
        """`plan` written in the blind scale (aliases), with real values and symbols (exact: see
        the module docstring); a literal compared with another member's price (`SYM2.last >
        104.5`) maps back on that member's scale, a money size (`BUY $500`) on the plan's."""
        target = self.real_symbol(plan.instrument) if plan.instrument is not None else None
        own = target or symbol

        def scales(kind: str, other: str | None) -> Callable[[float], float]:
            sym = (self.real_symbol(other) or other) if other is not None else own
            scale = self.prices[sym] if kind == "Price" else self.money[sym]
            return scale.back

        def real(name: str) -> str:
            return self.real_symbol(name) or name

        return _map_plan(plan, scales, real)


# ----------------------------------------------------------------------------------------
# the plan walk: which literals are prices


Kind = str | None
"""What a literal stands for: "Price" or "Money" (of the plan's own symbol), "Price@SYM" or
"Money@SYM" (of another member `SYM`, as the plan writes it: a cross-symbol read), or None
(neither: left as written)."""
Maps = Callable[[str], Callable[[float], float]]
"""A kind -> the mapping of its literals."""


def _kind(e: ast.Expr) -> Kind:
    """What `e` stands for (see `Kind`)."""
    if isinstance(e, ast.Series):
        t = SERIES[e.name].type if e.name in SERIES else None
        return t if t in ("Price", "Money") else None
    if isinstance(e, ast.Call):
        spec = FUNCTIONS.get(e.name)
        return spec.returns if spec is not None and spec.returns in ("Price", "Money") else None
    if isinstance(e, ast.SymbolRead):
        inner = _kind(e.read)
        return f"{inner}@{e.symbol}" if inner is not None else None
    if isinstance(e, ast.Neg):
        return _kind(e.operand)
    if isinstance(e, ast.Arith):
        left, right = _kind(e.left), _kind(e.right)
        if e.op in ("+", "-"):
            return left or right
        if e.op == "*":
            return left if right is None else right if left is None else None
        return left if right is None else None  # a ratio of two prices is a number
    return None


def _expr(e: ast.Expr, kind: Kind, f: Maps, symbol: Callable[[str], str]) -> ast.Expr:
    """`e` with its price and money literals mapped by `f` (`kind`: what `e` stands for) and its
    cross-symbol reads' symbols by `symbol`."""
    if isinstance(e, ast.Number):
        return ast.Number(f(kind)(e.value)) if kind is not None else e
    if isinstance(e, ast.SymbolRead):
        return ast.SymbolRead(symbol(e.symbol), e.read)
    if isinstance(e, ast.Neg):
        return ast.Neg(_expr(e.operand, kind, f, symbol))
    if isinstance(e, ast.Arith):
        if e.op in ("+", "-"):
            k = kind or _kind(e.left) or _kind(e.right)
            return ast.Arith(e.op, _expr(e.left, k, f, symbol), _expr(e.right, k, f, symbol))
        # a product or ratio: only the price factor is a price (vwap * 1.005, 2 * atr(5m))
        return ast.Arith(e.op, _expr(e.left, _kind(e.left), f, symbol), _expr(e.right, _kind(e.right), f, symbol))
    if isinstance(e, ast.Compare | ast.Crosses):
        k = _kind(e.left) or _kind(e.right)
        left, right = _expr(e.left, k, f, symbol), _expr(e.right, k, f, symbol)
        if isinstance(e, ast.Compare):
            return ast.Compare(e.op, left, right)
        return ast.Crosses(e.direction, left, right)
    if isinstance(e, ast.And):
        return ast.And(tuple(_expr(x, None, f, symbol) for x in e.operands))
    if isinstance(e, ast.Or):
        return ast.Or(tuple(_expr(x, None, f, symbol) for x in e.operands))
    if isinstance(e, ast.Not):
        return ast.Not(_expr(e.operand, None, f, symbol))
    return e


def _offset(o: ast.Offset | None, f: Callable[[float], float]) -> ast.Offset | None:
    if o is None or o.mode == "pct":
        return o
    return ast.Offset(o.mode, f(o.value))


def _action(a: ast.Action, f: Maps, symbol: Callable[[str], str]) -> ast.Action:
    if not isinstance(a, ast.Order):
        return a
    p = f("Price")
    size = a.size
    if size is not None and size.basis == "cash":  # an amount of money: the symbol's money scale
        size = ast.Size("cash", f("Money")(size.value))
    return msgspec.structs.replace(
        a, price=_expr(a.price, "Price", f, symbol) if a.price is not None else None,
        stop=_offset(a.stop, p), target=_offset(a.target, p), trail=_offset(a.trail, p), size=size)


def _map_plan(plan: ast.Plan, scales: Callable[[str, str | None], Callable[[float], float]],
              symbol: Callable[[str], str]) -> ast.Plan:
    """`plan` with every literal of a kind mapped by `scales(kind, other)` (`other` the symbol a
    cross-symbol read names, None for the plan's own) and every symbol by `symbol`."""

    def f(kind: str) -> Callable[[float], float]:
        base, _, other = kind.partition("@")
        return scales(base, other or None)

    rules = tuple(
        msgspec.structs.replace(r, cond=_expr(r.cond, None, f, symbol),
                                actions=tuple(_action(a, f, symbol) for a in r.actions))
        for r in plan.rules)
    risk = plan.risk
    if risk.maxloss is not None:
        risk = msgspec.structs.replace(risk, maxloss=f("Money")(risk.maxloss))
    inst = symbol(plan.instrument) if plan.instrument is not None else None
    return msgspec.structs.replace(plan, rules=rules, risk=risk, instrument=inst)


__all__ = ["ALIAS_PREFIX", "ALIAS_SALT", "BLIND_FIRST_VOLUME", "Blind", "alias_order", "Scale", "blind_decimals"]
