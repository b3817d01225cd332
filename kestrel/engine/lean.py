"""Lean per-tick code for the generated reference loop (`codegen`).

The generated loop runs once per tick, so every bytecode counts. This module holds the
parts of the generation that make it lean without changing a single value: the same
floating-point operations in the same order as before, only fewer of them on ticks whose
values nobody reads.

- **Windows** (`high`/`low`): one monotonic deque of values and one of timestamps per
  window (no tuple per tick); the ticks sharing the current timestamp wait as the scalar
  `pv` (plus the list `pend` for all but the last of them, which only a repeated timestamp
  fills) and are pushed, in order, when a later timestamp arrives.
- **Values read only by conditions** (`inline`): a value line `v = expr` whose variable
  no update line and no cross reads moves into the conditions that read it (at most
  `INLINE_MAX` times), so it is computed only when a rule is armed and its cheaper conjuncts
  hold; a value nothing reads is not computed. The state updates stay on every tick.
- **Crosses** (`crosses`): a `CROSSES` is `prev_left <= prev_right and left > right`
  evaluated where the condition reads it; the previous values are stored once per distinct
  (left, right) pair at the end of the tick (`post`), so two crosses of one pair (`ABOVE`
  and `BELOW`) share them. Operands that a fire can change within the tick (`pos_`,
  `rpnl_`) or that are computed expressions are copied before the rules run (`pre`).

Conditions stay side-effect free (a cross no longer assigns), so the order of an `AND`'s
operands cannot change its truth value: `cost` puts the cheap ones first.
"""

from __future__ import annotations

import re

from kestrel.engine.indicators import IndicatorSpec
from kestrel.lang import ast

INLINE_MAX = 4  # a value read more often than this by the conditions is computed once (a rule's
# condition appears twice: whole, and as the rest of its account gate)
IDENT = re.compile(r"[A-Za-z_]\w*\Z")
NUMBER = re.compile(r"-?\d[\d.e+-]*\Z")
# locals a fire can change in the middle of the rules (re-read after `fire`)
MUTABLE = frozenset({"pos_", "rpnl_"})
# locals cheap to read twice (the `!=` guard reads each operand twice)
PLAIN = frozenset({"l", "b", "a", "s", "pos_", "rpnl_"})
# series computed from a column (mid, spread, time, vwap) or by a call (upnl, pnl)
_COMPUTED = {"mid": 1, "spread": 1, "time": 1, "vwap": 1, "upnl": 3, "pnl": 3}


def cheap(x: str) -> bool:
    """A plain local, a time-of-day constant or a number literal."""
    return x in PLAIN or bool(re.fullmatch(r"tl\d+", x)) or bool(NUMBER.match(x))


def cost(e: ast.Expr) -> int:
    """A rough evaluation cost of a condition's operand, to order an `AND` cheap first."""
    if isinstance(e, ast.Number | ast.Percent | ast.TimeOfDay):
        return 0
    if isinstance(e, ast.Series):
        return _COMPUTED.get(e.name, 0)
    if isinstance(e, ast.Call):
        return 3
    if isinstance(e, ast.Crosses):
        return 2
    if isinstance(e, ast.Neg | ast.Not):
        return cost(e.operand)
    if isinstance(e, ast.Arith | ast.Compare):
        return 1 + cost(e.left) + cost(e.right)
    if isinstance(e, ast.And | ast.Or):
        return sum(cost(o) for o in e.operands)
    return 3


def windows_update(windows: list[tuple[str, IndicatorSpec]]) -> list[str]:
    """Lines pushing the previous timestamp's ticks into the windows' monotonic deques
    when the timestamp changes. State: `pt` (that timestamp), `pv` (its last tick's value),
    `pend` (its earlier ticks' values). The very first push is (SENTINEL, nan) into empty
    deques, which the next expiry check removes: no test for it per tick."""

    def push(x: str, ind: str) -> list[str]:
        out = []
        for v, spec in windows:
            k = v[1:]
            op = "<=" if spec.kind == "high" else ">="
            out.append(f"{ind}while dqv{k} and dqv{k}[-1] {op} {x}: dqv{k}.pop(); dqt{k}.pop()")
            out.append(f"{ind}dqv{k}.append({x}); dqt{k}.append(pt)")
        return out

    return [
        "if t != pt:",
        "    if pend:",
        "        for x_ in pend:",
        *push("x_", "            "),
        "        pend.clear()",
        *push("pv", "    "),
        "    pt = t",
        "else:",
        "    pend.append(pv)",
        "pv = l",
    ]


def _uses(name: str, text: str) -> int:
    return len(re.findall(rf"\b{name}\b", text))


def inline(defs: list[tuple[str, str]], upd: list[str], conds: list[str],
           prices: list[str], keep: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Move each value line of `defs` (`v = expr`, top level in `upd`) that no other update
    line and no line of `keep` (the crosses' code) reads into the conditions and prices
    that read it (when they do at most `INLINE_MAX` times); drop it when nothing reads it.
    Later values may read earlier ones, so they are resolved last to first."""
    upd, conds, prices = list(upd), list(conds), list(prices)
    for v, expr in reversed(defs):
        line = f"{v} = {expr}"
        at = upd.index(line)
        rest = "\n".join(upd[:at] + upd[at + 1:] + keep)
        if _uses(v, rest):
            continue
        n = sum(_uses(v, c) for c in conds + prices)
        if n > INLINE_MAX:
            continue
        del upd[at]
        pat = re.compile(rf"\b{v}\b")
        conds = [pat.sub(lambda _m: f"({expr})", c) for c in conds]
        prices = [pat.sub(lambda _m: f"({expr})", p) for p in prices]
    return upd, conds, prices


def crosses(items: list[tuple[str, str, str, str]]
            ) -> tuple[list[tuple[str, str]], list[str], list[str], dict[str, str]]:
    """The crosses' code: (state variables with their initial values, `pre` lines copying
    operands before the rules, `post` lines storing this tick's operands as the previous
    ones, and each cross's expression by name)."""
    pairs: dict[tuple[str, str], int] = {}
    state: list[tuple[str, str]] = []
    pre: list[str] = []
    post: list[str] = []
    exprs: dict[str, str] = {}
    for name, x, y, d in items:
        if (x, y) not in pairs:
            p = pairs[(x, y)] = len(pairs)
            cur = []
            for side, z in (("l", x), ("r", y)):
                if (IDENT.match(z) and z not in MUTABLE) or NUMBER.match(z):
                    cur.append(z)
                else:
                    pre.append(f"cc{p}{side} = {z}")
                    cur.append(f"cc{p}{side}")
                state.append((f"pp{p}{side}", "nan"))
                post.append(f"pp{p}{side} = {cur[-1]}")
        p = pairs[(x, y)]
        cl, cr = post[2 * p].split(" = ")[1], post[2 * p + 1].split(" = ")[1]
        if d == "above":
            exprs[name] = f"(pp{p}l <= pp{p}r and {cl} > {cr})"
        else:
            exprs[name] = f"(pp{p}l >= pp{p}r and {cl} < {cr})"
    return state, pre, post, exprs


def substitute(names: dict[str, str], texts: list[str]) -> list[str]:
    """Replace each whole-word name by its expression in every text."""
    if not names:
        return texts
    pat = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
    return [pat.sub(lambda m: names[m.group(1)], t) for t in texts]


ACCOUNT = frozenset({"pos", "rpnl"})  # series that change only when the broker runs


def account_only(e: ast.Expr) -> bool:
    """Whether an expression reads only `pos`, `rpnl` and numbers: its value changes only
    at a broker step or a fire, where the generated loop re-reads the account."""
    if isinstance(e, ast.Number | ast.Percent):
        return True
    if isinstance(e, ast.Series):
        return e.name in ACCOUNT
    if isinstance(e, ast.Neg | ast.Not):
        return account_only(e.operand)
    if isinstance(e, ast.Arith | ast.Compare):
        return account_only(e.left) and account_only(e.right)
    if isinstance(e, ast.And | ast.Or):
        return all(account_only(o) for o in e.operands)
    return False


def split_account(cond: ast.Expr) -> tuple[list[ast.Expr], list[ast.Expr]]:
    """A condition's top-level `AND` operands as (account-only, the rest), each in the
    plan's order (`cost` orders the rest): the account part is a gate the loop computes
    once per broker event instead of once per tick."""
    ops = list(cond.operands) if isinstance(cond, ast.And) else [cond]
    return [o for o in ops if account_only(o)], [o for o in ops if not account_only(o)]
