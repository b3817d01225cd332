"""Loading market-data files (CSV, Parquet) into `MarketData`.

The file is read into columns (`kestrel.data.readers`), checked and assembled into ticks here,
on the tick grid (`kestrel.data.grid`) and in the sessions of its exchange calendar
(`kestrel.market.calendar`). Checks here, each a `DataError` naming file, line/row and column:
timestamps going backwards, prices not positive, price spikes, inconsistent bar (high/low),
crossed quote (the readers check the rows themselves: see there).

Crossed quotes (ask < bid) follow `crossed`: "error" (default: names the first bad row and
the count), "drop" (rows removed, count reported) or "keep" (rows kept as recorded, count
reported, `MarketData.crossed_kept` set: the documented exception to the Ticks bid <= ask
invariant, see `kestrel.market.ticks`).

Bars become ticks: each bar yields 4 synthetic trade ticks at offsets 0, 1/4, 1/2 and 3/4 of
the bar: open, then low then high when close >= open (else high then low), then close; each
carries a quarter of the bar's volume; bid = ask = last.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from kestrel.market.calendar import build_sessions
from kestrel.data.daily import daily_bar_ticks, is_daily
from kestrel.data.errors import DataError
from kestrel.data.quotes import quote_bar_ticks
from kestrel.data.origin import FileOrigin, remember
from kestrel.data.grid import MAX_TICK_DECIMALS, MIN_TICK_SIZE, check_tick_grid, infer_tick_size
from kestrel.data.columns import ColumnError, ColumnMap, parse_columns
from kestrel.data.readers import (Table, check_text, columns_text, delimiter_hint, detect_preset, detect_spec,
                                  read_table, show)
from kestrel.data.spec import DEFAULT_SPIKE_FACTOR, CrossedPolicy, LoadSpec, SpikePolicy, preset
from kestrel.market.instrument import Instrument
from kestrel.market.data import MarketData
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import F64, I64, NS_PER_S, Ticks


class LoadReport(msgspec.Struct, frozen=True):
    """What a load did: rows read, ticks produced, crossed quotes found and what was done."""

    path: str
    preset: str | None
    kind: str
    rows: int
    ticks: int
    sessions: int
    tick_size: float
    tick_size_inferred: bool
    crossed: int = 0
    crossed_policy: str = "error"
    dropped: int = 0
    spikes: int = 0
    spikes_policy: str = "error"
    spikes_dropped: int = 0
    spike_factor: float = DEFAULT_SPIKE_FACTOR
    preset_detected: bool = False  # `preset` was detected from the file's columns (and name)

    def notes(self) -> list[str]:
        guessed = [f"tick size {self.tick_size:g} inferred"] if self.tick_size_inferred else []
        if self.preset_detected and self.preset is not None:
            guessed.insert(0, f"preset {self.preset} detected")
        out = [f"{self.rows} rows → {self.ticks} ticks in {self.sessions} session{'s' if self.sessions != 1 else ''}"
               + (f" ({', '.join(guessed)})" if guessed else "")]
        if self.crossed:
            did = f"dropped {self.dropped}" if self.crossed_policy == "drop" else "kept as is"
            out.append(f"{self.crossed} crossed quotes (ask < bid): {did}")
        if self.spikes:
            did = f"dropped {self.spikes_dropped}" if self.spikes_policy == "drop" else "kept as is"
            out.append(f"{self.spikes} price spikes (> {self.spike_factor:g}x from both neighbours): {did}")
        return out


@dataclass(frozen=True, slots=True)
class Loaded:
    data: MarketData
    report: LoadReport


def _check_monotonic(t: Table) -> None:
    back = np.flatnonzero(t.ts[1:] < t.ts[:-1])
    if back.size:
        i = int(back[0]) + 1
        a = np.datetime_as_string(t.ts[i - 1 : i + 1].astype("datetime64[ns]"), unit="ms")
        raise DataError(
            t.path,
            f"timestamp goes backwards: {a[1]}Z is before the previous row's {a[0]}Z "
            f"({back.size} such rows); sort the file by time",
            column=t.columns["ts"],
            **t.where(i),
        )


def _check_signs(t: Table) -> None:
    """Prices must be positive, sizes and volumes not negative."""
    for role, v in t.values.items():
        sized = role in ("size", "volume") or role.endswith("_size")
        bad = np.flatnonzero(v < 0 if sized else v <= 0)
        if bad.size:
            i = int(bad[0])
            what = "negative size" if sized else "price not positive"
            rows = f"{bad.size} such row{'s' if bad.size != 1 else ''}"
            raise DataError(t.path, f"{what}: {float(v[i])!r} ({rows})",
                            column=t.columns[role], **t.where(i))


PRICE_ROLES = ("bid", "ask", "price", "open", "high", "low", "close")


def _spikes_in(v: F64, factor: float) -> npt.NDArray[np.bool_]:
    mid, prev, nxt = v[1:-1], v[:-2], v[2:]
    up = (mid > factor * prev) & (mid > factor * nxt)
    down = (mid * factor < prev) & (mid * factor < nxt)
    out: npt.NDArray[np.bool_] = np.concatenate(([False], up | down, [False]))
    return out


def spike_rows(values: dict[str, F64], factor: float) -> npt.NDArray[np.bool_]:
    """Rows where a price jumps by more than `factor` (up or down) from BOTH its neighbours
    in the same column: a one-row excursion that reverts (a fat-finger tick). Rows at the
    ends have one neighbour and are never flagged. Prices are positive here (checked before)."""
    n = len(next(iter(values.values())))
    mask = np.zeros(n, dtype=bool)
    if n >= 3:
        for role in PRICE_ROLES:
            if role in values:
                mask |= _spikes_in(values[role], factor)
    return mask


def _check_bars(t: Table) -> None:
    o, h, lo, c = (t.values[k] for k in ("open", "high", "low", "close"))
    bad_h = np.flatnonzero(h < np.maximum(np.maximum(o, c), lo))
    if bad_h.size:
        i = int(bad_h[0])
        raise DataError(t.path, f"inconsistent bar: high {float(h[i])} below open/close/low", column=t.columns["high"], **t.where(i))
    bad_l = np.flatnonzero(lo > np.minimum(o, c))
    if bad_l.size:
        i = int(bad_l[0])
        raise DataError(t.path, f"inconsistent bar: low {float(lo[i])} above open/close", column=t.columns["low"], **t.where(i))


def _bars_to_ticks(t: Table, spec: LoadSpec) -> tuple[I64, F64, F64]:
    o, h, lo, c = (t.values[k] for k in ("open", "high", "low", "close"))
    v = t.values.get("volume", np.zeros_like(o))
    _check_bars(t)
    tf = spec.bar_seconds * NS_PER_S
    close_gap = np.flatnonzero(np.diff(t.ts) < tf)
    if close_gap.size:
        i = int(close_gap[0]) + 1
        raise DataError(t.path, f"bar starts less than bar_seconds={spec.bar_seconds} after the previous one",
                        column=t.columns["ts"], **t.where(i))
    bull = c >= o
    px = np.stack([o, np.where(bull, lo, h), np.where(bull, h, lo), c], axis=1).reshape(-1)
    offs = np.array([0, tf // 4, tf // 2, 3 * tf // 4], dtype=np.int64)
    ts = (t.ts[:, None] + offs[None, :]).reshape(-1)
    return ts, px, np.repeat(v / 4.0, 4)


def _instant_text(ts_ns: int) -> str:
    """An instant of a row for an error message: its UTC date, with the time unless midnight."""
    import datetime as dt

    t = dt.datetime.fromtimestamp(ts_ns / 1e9, tz=dt.timezone.utc)
    return t.date().isoformat() if ts_ns % 86_400_000_000_000 == 0 else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def assemble(t: Table, spec: LoadSpec, crossed: CrossedPolicy, preset_name: str | None,
              symbol: str | None, tick_size: float | None, spikes: SpikePolicy = "error",
              spike_factor: float = DEFAULT_SPIKE_FACTOR, multiplier: float | None = None,
              currency: str | None = None, min_qty: int | None = None, detected: bool = False,
              lot_size: float | None = None) -> Loaded:
    """The checked ticks, sessions and instrument of the read table `t` (module docstring);
    `detected`: the preset was detected from the file's columns (and name)."""
    rows = len(t.ts)
    _check_monotonic(t)
    _check_signs(t)
    if not (spike_factor > 1 and math.isfinite(spike_factor)):
        raise ValueError(f"spike factor must be a number > 1, got {spike_factor!r}")
    spiky = spike_rows(t.values, spike_factor)
    n_spikes = int(spiky.sum())
    spikes_dropped = 0
    if n_spikes:
        if spikes == "error":
            i = int(np.flatnonzero(spiky)[0])
            role = next(r for r in PRICE_ROLES if r in t.values and _spikes_in(t.values[r], spike_factor)[i])
            v = t.values[role]
            whose = f"{symbol} " if symbol else ""
            raise DataError(
                t.path,
                f"{whose}price spike at {_instant_text(int(t.ts[i]))}: {float(v[i])!r} between {float(v[i - 1])!r} and {float(v[i + 1])!r} (more than "
                f"{spike_factor:g}x from both neighbours); {n_spikes} such row{'s' if n_spikes != 1 else ''}; "
                "pass spikes='drop' or 'keep' (CLI --spikes drop|keep) or a larger spike factor (--spike-factor)",
                column=t.columns[role],
                **t.where(i),
            )
        if spikes == "drop":
            t = t.keep(~spiky)
            spikes_dropped = n_spikes
    n_crossed = dropped = 0
    sessions: tuple[SessionSpec, ...] | None = None
    if spec.kind in ("quotes", "quote_bars"):
        if spec.kind == "quotes":
            bid, ask = t.values["bid"], t.values["ask"]
            ts, row = t.ts, None
        else:
            ts, bid, ask, row = quote_bar_ticks(t, spec.bar_seconds)
        bad = np.flatnonzero(ask < bid)
        n_crossed = int(bad.size)
        if n_crossed:
            if crossed == "error":
                i = int(bad[0]) if row is None else int(row[bad[0]])
                raise DataError(
                    t.path,
                    f"crossed quote: ask {float(ask[int(bad[0])])} < bid {float(bid[int(bad[0])])}; {n_crossed} of "
                    f"{rows if row is None else len(ts)} {'rows' if row is None else 'quotes'} are crossed "
                    f"({100.0 * n_crossed / (rows if row is None else len(ts)):.1f}%); pass crossed='drop' or 'keep' (CLI --crossed drop|keep)",
                    column=t.columns["ask"],
                    **t.where(i),
                )
            if crossed == "drop":
                keep = ask >= bid
                ts, bid, ask = ts[keep], bid[keep], ask[keep]
                dropped = n_crossed
        last = (bid + ask) / 2.0
        size = np.zeros_like(bid)
        prices = np.concatenate((bid, ask))
    elif spec.kind == "trades":
        ts, last = t.ts, t.values["price"]
        bid = ask = last
        size = t.values.get("size", np.zeros_like(last))
        prices = last
    elif is_daily(t.ts):
        _check_bars(t)
        ts, last, size, sessions = daily_bar_ticks(t, spec.calendar)
        bid = ask = last
        prices = np.concatenate([t.values[k] for k in ("open", "high", "low", "close")])
    else:
        ts, last, size = _bars_to_ticks(t, spec)
        bid = ask = last
        prices = np.concatenate([t.values[k] for k in ("open", "high", "low", "close")])
    inferred = tick_size is None and spec.tick_size is None
    tick = tick_size if tick_size is not None else spec.tick_size
    if tick is None:
        tick = infer_tick_size(prices)
    else:
        check_tick_grid(t, float(tick))
    ticks = Ticks(ts, bid, ask, last, np.ascontiguousarray(size, dtype=np.float64))
    if sessions is None:
        sessions = build_sessions(ts, spec.session, spec.calendar)
    sym = symbol or spec.symbol
    try:
        instrument = Instrument(symbol=sym, tick_size=float(tick),
                                multiplier=spec.multiplier if multiplier is None else float(multiplier),
                                currency=spec.currency if currency is None else currency,
                                min_qty=spec.min_qty if min_qty is None else min_qty,
                                lot_size=spec.lot_size if lot_size is None else lot_size)
    except ValueError as e:
        raise DataError(t.path, str(e)) from None
    data = MarketData(sym, float(tick), ticks, sessions,
                      crossed_kept=crossed == "keep" and n_crossed > 0, instrument=instrument)
    report = LoadReport(
        path=str(t.path), preset=preset_name, kind=spec.kind, rows=rows, ticks=len(ticks),
        sessions=len(sessions), tick_size=float(tick), tick_size_inferred=inferred,
        crossed=n_crossed, crossed_policy=crossed, dropped=dropped,
        spikes=n_spikes, spikes_policy=spikes, spikes_dropped=spikes_dropped, spike_factor=spike_factor,
        preset_detected=detected,
    )
    return Loaded(data, report)


# ------------------------------------------------------------------------------------------
# public API


def load(
    path: str | Path,
    preset_name: str | None = None,
    *,
    spec: LoadSpec | None = None,
    crossed: CrossedPolicy = "error",
    symbol: str | None = None,
    tick_size: float | None = None,
    spikes: SpikePolicy = "error",
    spike_factor: float = DEFAULT_SPIKE_FACTOR,
    multiplier: float | None = None,
    currency: str | None = None,
    delimiter: str | None = None,
    columns: ColumnMap | str | None = None,
) -> Loaded:
    """Load a CSV or Parquet file (by extension) with a preset, an explicit spec, a preset
    detected from its columns (and its file name when presets share the columns: the report
    records the preset as detected), or the column roles inferred from its header (when no
    preset matches, or `columns` maps roles to columns: a `ColumnMap` or `ts=Date,close=Close`
    text); `delimiter` overrides the spec's field separator (`;`, tab). A long-format file (a
    symbol column) loads the rows of `symbol`, or of its one symbol. Raises `DataError` on bad
    input."""
    p = Path(path)
    if not p.is_file():
        raise DataError(p, "is a directory, not a data file" if p.is_dir()
                        else "not a regular file" if p.exists() else "no such file")
    if crossed not in ("error", "drop", "keep"):
        raise ValueError(f"crossed policy must be error, drop or keep, got {crossed!r}")
    if spikes not in ("error", "drop", "keep"):
        raise ValueError(f"spikes policy must be error, drop or keep, got {spikes!r}")
    if isinstance(columns, str):
        try:
            columns = parse_columns(columns)
        except ColumnError as e:
            raise DataError(p, str(e)) from None
    if columns is not None and (preset_name is not None or spec is not None):
        raise DataError(p, "give a column mapping or a preset/spec, not both (--columns or --preset)")
    detected = False
    if spec is None and preset_name is None:
        preset_name, spec = detect_spec(p, delimiter or ",", columns, symbol=plausible_symbol(p))
        detected = preset_name is not None
    elif spec is None:
        try:
            spec = preset(preset_name or "")
        except ValueError as e:
            raise DataError(p, str(e)) from None
    if delimiter is not None:
        spec = msgspec.structs.replace(spec, delimiter=delimiter)
    table = read_table(p, spec)
    if table.symbols is not None:
        table, symbol = one_symbol(table, symbol)
    stat = p.stat()
    loaded = assemble(table, spec, crossed, preset_name, symbol, tick_size, spikes, spike_factor,
                      multiplier, currency, detected=detected)
    mapped = columns.text() if isinstance(columns, ColumnMap) else None
    remember(loaded.data, FileOrigin(str(p.resolve()), loaded.report, spec.delimiter, stat.st_size, stat.st_mtime_ns,
                                     mapped))
    return loaded


_SYMBOL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,15}$")


def plausible_symbol(path: Path) -> str:
    """A per-symbol file's symbol from its name (`aapl.csv` is AAPL); UNKNOWN when the name is
    not a short symbol."""
    stem = path.stem
    return stem.upper() if _SYMBOL.match(stem) else "UNKNOWN"


def symbols_text(names: list[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def one_symbol(t: Table, symbol: str | None) -> tuple[Table, str]:
    """The rows of one symbol of a long-format table: `symbol`'s, or the file's only one."""
    assert t.symbols is not None
    names = sorted(set(t.symbols.tolist()))
    if symbol is None:
        if len(names) != 1:
            raise DataError(t.path, f"the file holds {len(names)} symbols ({symbols_text(names)}): pick one with "
                            "--symbol (symbol=...), or load it as a universe (load_universe)",
                            column=t.columns.get("symbol"))
        return t, names[0]
    if symbol not in names:
        raise DataError(t.path, f"no rows of symbol {symbol!r}; the file holds {symbols_text(names)}",
                        column=t.columns.get("symbol"))
    return t.keep(t.symbols == symbol), symbol


def load_market_data(path: str | Path, preset_name: str | None = None, **options: Any) -> MarketData:
    """`load(...)` returning only the data."""
    return load(path, preset_name, **options).data


__all__ = [
    "MAX_TICK_DECIMALS",
    "MIN_TICK_SIZE",
    "PRICE_ROLES",
    "LoadReport",
    "assemble",
    "Loaded",
    "build_sessions",
    "check_text",
    "check_tick_grid",
    "columns_text",
    "delimiter_hint",
    "detect_preset",
    "infer_tick_size",
    "load",
    "load_market_data",
    "show",
    "spike_rows",
]
