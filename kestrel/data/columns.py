"""Column roles: which column of a file is the timestamp, the symbol, a bar's open ... and the
`--columns ts=...,close=...` mapping that names them when the names are not the common ones.

A role is what a column means to the loader (`ROLES`). `infer_roles` finds the roles of a
header: a column given in the mapping takes its role; every other role takes the first header
column whose normalized name (lower case, blanks and dashes as `_`) is one of the role's common
names (`ALIASES`, in order of preference). The roles found decide the file's kind: bars (open,
high, low and close), quote bars (bid and ask opens and closes), quotes (bid and ask) or trades
(price), tried in that order; `column_spec` turns them into a `LoadSpec`.

Invariants: a mapping names each role at most once and each column at most once; a mapped
column the file does not have is an error naming the file's columns; inference never gives two
roles one column; columns no role claims are ignored (a `vwap` column is not read).
"""

from __future__ import annotations

import re

import msgspec

from kestrel.data.bounds import read_limits
from kestrel.data.spec import Kind, LoadSpec

# role -> its common column names, most preferred first (normalized: lower case, `_` for blanks)
ALIASES: dict[str, tuple[str, ...]] = {
    "ts": ("ts", "timestamp", "ts_utc", "ts_event", "timestamp_utc", "datetime", "date", "time"),
    "symbol": ("symbol", "ticker"),
    "open": ("open",),
    "high": ("high",),
    "low": ("low",),
    "close": ("close",),
    "volume": ("volume", "vol"),
    "bid": ("bid", "bid_px", "bid_price"),
    "ask": ("ask", "ask_px", "ask_price", "offer"),
    "bid_size": ("bid_size", "bid_qty", "bid_volume", "bidsize"),
    "ask_size": ("ask_size", "ask_qty", "ask_volume", "asksize", "offer_size"),
    "bid_open": ("bid_open",),
    "bid_close": ("bid_close",),
    "ask_open": ("ask_open",),
    "ask_close": ("ask_close",),
    "price": ("price", "last", "trade_price"),
    "size": ("size", "qty", "quantity", "amount"),
}
ROLES: tuple[str, ...] = tuple(ALIASES)
"""Every role a column can take (the keys `--columns` accepts)."""

# kind -> (roles it needs, roles it reads when present), tried in this order
KIND_ROLES: tuple[tuple[Kind, tuple[str, ...], tuple[str, ...]], ...] = (
    ("bars", ("open", "high", "low", "close"), ("volume",)),
    ("quote_bars", ("bid_open", "bid_close", "ask_open", "ask_close"), ("bid_size", "ask_size")),
    ("quotes", ("bid", "ask"), ("bid_size", "ask_size")),
    ("trades", ("price",), ("size",)),
)

_PAIR = re.compile(r"^\s*([A-Za-z_]+)\s*=\s*(.*?)\s*$")


class ColumnError(ValueError):
    """A bad column mapping or a header without the columns a kind needs (one line)."""


class ColumnMap(msgspec.Struct, frozen=True):
    """Role -> file column, as `--columns ts=Date,close=Adj Close` gives it (pairs in the
    order written; each role and each column at most once)."""

    pairs: tuple[tuple[str, str], ...] = ()

    def get(self, role: str) -> str | None:
        return next((c for r, c in self.pairs if r == role), None)

    def text(self) -> str:
        """The mapping as `--columns` text (parses back to an equal map)."""
        return ",".join(f"{r}={c}" for r, c in self.pairs)


def columns_text(header: list[str]) -> str:
    """A header's columns for a message: printable names as they are, others quoted and cut
    (only their count when messages may not quote the file: `ReadLimits.echo`)."""
    if not header or header == [""]:
        return "no columns"
    if not read_limits().echo:
        return f"({len(header)} name{'s' if len(header) != 1 else ''}, not shown here)"
    names = [h if h.isprintable() and len(h) <= 40 else repr(h[:40]) + ("..." if len(h) > 40 else "")
             for h in header[:20]]
    return ", ".join(names) + (f" (and {len(header) - 20} more)" if len(header) > 20 else "")


def _shown(text: str) -> str:
    """A name from a file or a command line for a one-line message (quoted, cut)."""
    return repr(text[:40]) + ("..." if len(text) > 40 else "")


def normalize(name: str) -> str:
    """A column name as the aliases are written: trimmed, lower case, runs of blanks, dashes
    and dots as one `_`."""
    return re.sub(r"[\s\-.]+", "_", name.strip().lower())


def parse_columns(text: str) -> ColumnMap:
    """`ts=Date,close=Adj Close` -> `ColumnMap`. Roles are case-insensitive; a column name is
    taken as written, without surrounding blanks, and may hold anything but `,` and `=`.
    Raises `ColumnError` naming the bad pair and the fix."""
    if not text.strip():
        raise ColumnError("--columns is empty: give role=column pairs like ts=Date,close=Close")
    pairs: list[tuple[str, str]] = []
    for part in text.split(","):
        m = _PAIR.match(part)
        if m is None:
            raise ColumnError(f"--columns: {_shown(part.strip())} is not role=column (e.g. ts=Date); roles: {', '.join(ROLES)}")
        role, column = m.group(1).lower(), m.group(2)
        if role not in ALIASES:
            raise ColumnError(f"--columns: unknown role {_shown(m.group(1))}; roles: {', '.join(ROLES)}")
        if not column or "=" in column:
            raise ColumnError(f"--columns: {_shown(part.strip())} names no column after '=' (e.g. {role}=Date)")
        if any(r == role for r, _ in pairs):
            raise ColumnError(f"--columns: role {role!r} is given twice; give each role once")
        other = next((r for r, c in pairs if c == column), None)
        if other is not None:
            raise ColumnError(f"--columns: column {_shown(column)} is given for both {other!r} and {role!r}; "
                              "a column has one role")
        pairs.append((role, column))
    return ColumnMap(tuple(pairs))


class Roles(msgspec.Struct, frozen=True):
    """The roles found in a header: the kind and role -> column (the header's own spelling)."""

    kind: Kind
    columns: dict[str, str]


def infer_roles(header: list[str], mapping: ColumnMap | None = None, *, where: str = "") -> Roles:
    """The roles of `header` (see the module docstring). Raises `ColumnError` when a mapped
    column is not in the header or no kind's roles are all found (its message starts with
    `where: ` when `where` is given)."""
    at = f"{where}: " if where else ""
    found: dict[str, str] = {}
    taken: set[str] = set()
    for role, column in (mapping.pairs if mapping else ()):
        if column not in header:
            raise ColumnError(f"{at}no column {_shown(column)} (--columns {role}=...); "
                              f"the columns are {columns_text(header)}")
        found[role] = column
        taken.add(column)
    by_name: dict[str, str] = {}
    for h in header:
        by_name.setdefault(normalize(h), h)
    for role, names in ALIASES.items():
        if role in found:
            continue
        hit = next((by_name[n] for n in names if n in by_name and by_name[n] not in taken), None)
        if hit is not None:
            found[role] = hit
            taken.add(hit)
    if "ts" not in found:
        raise ColumnError(f"{at}no timestamp column ({', '.join(ALIASES['ts'])}) among columns "
                          f"{columns_text(header)}; name it with --columns ts=COLUMN")
    for kind, need, optional in KIND_ROLES:
        if all(r in found for r in need):
            keep = ("ts", "symbol", *need, *optional)
            return Roles(kind, {r: found[r] for r in keep if r in found})
    raise ColumnError(
        f"{at}no price columns: found {', '.join(f'{r}={_shown(c)}' for r, c in found.items())} among "
        f"{columns_text(header)}; bars need open, high, low, close, quotes bid and ask, trades price "
        "(name them with --columns, e.g. close=Last)")


def column_spec(roles: Roles, **options: object) -> LoadSpec:
    """A `LoadSpec` reading the columns of `roles` (with the other `LoadSpec` fields given)."""
    c = roles.columns
    if roles.kind == "quote_bars":
        fields: dict[str, object] = {"bid": c["bid_close"], "ask": c["ask_close"], "bid_open": c["bid_open"],
                                     "ask_open": c["ask_open"]}
        fields.update({k: c[k] for k in ("bid_size", "ask_size") if k in c})
    else:
        fields = {k: v for k, v in c.items() if k not in ("ts", "symbol")}
    return LoadSpec(kind=roles.kind, ts=c["ts"], symbols=c.get("symbol"), **fields, **options)  # type: ignore[arg-type]


__all__ = ["ALIASES", "KIND_ROLES", "ROLES", "ColumnError", "ColumnMap", "Roles", "column_spec", "columns_text",
           "infer_roles",
           "normalize", "parse_columns"]
