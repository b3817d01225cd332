"""Loading a universe: many instruments from one long-format file (a symbol column) or a folder
or glob of per-symbol files (the symbol from the file name, `AAPL.csv`), CSV or Parquet.

Every file's column roles are inferred from its header or named by a `ColumnMap`
(`kestrel.data.columns`); all files of one source share one layout (kind and roles), else the
load stops naming the two files. Each symbol's rows are checked and assembled like a single
file (`kestrel.data.load.assemble`: order, signs, spikes, bar shape, crossed quotes, the tick
grid), daily bars in the sessions of the exchange calendar, intraday ticks grouped in that
calendar's sessions. Given quotes as well (`quotes=`), each symbol's trades and quotes join by
time (`kestrel.data.quotes.join_quotes`); so do the files of one source whose inferred layouts
are exactly one of trade data (bars or trades) and one of quotes (quotes or quote bars), as a
folder holding a trade-bars and a quote-bars file (`split_trades_quotes`). Terms per symbol come from a symbols table
(`kestrel.data.symbols`), factor rows from a factor file (`kestrel.data.corporate`).

The report (`UniverseReport`) names, per symbol, the calendar sessions between its first and
last without a tick (nothing is filled in), the sessions before its first and after its last,
ticks outside session hours, the splits and dividends of its factor rows, and jumps of a split's
size no factor row explains.
"""

from __future__ import annotations

import datetime as dt
import glob
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import msgspec
import numpy as np

from kestrel.data.columns import ColumnError, ColumnMap, Roles, column_spec, infer_roles, parse_columns
from kestrel.data.corporate import SPIKE_LIMIT, adjust, read_factor_file, split_sized_jumps
from kestrel.data.errors import DataError
from kestrel.data.grid import infer_tick_size
from kestrel.data.load import Loaded, assemble, plausible_symbol, symbols_text
from kestrel.data.quotes import join_quotes
from kestrel.data.readers import Table, file_header, read_table
from kestrel.data.spec import DEFAULT_SPIKE_FACTOR, CrossedPolicy, LoadSpec, SpikePolicy
from kestrel.data.symbols import SymbolTerms, read_symbols
from kestrel.market.calendar import CalendarError, build_sessions, check_calendar, exchange_sessions
from kestrel.market.corporate import Dividend, FactorRow, ProbableSplit, Split, actions
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.universe import Member, Universe

Source = str | Path | Sequence[str | Path]
_SUFFIXES = (".csv", ".parquet")


class SymbolReport(msgspec.Struct, frozen=True):
    """What the load did for one symbol."""

    symbol: str
    path: str
    kind: str
    rows: int
    ticks: int
    sessions: int
    first: dt.date | None
    last: dt.date | None
    tick_size: float
    tick_size_inferred: bool
    missing: tuple[dt.date, ...] = ()  # universe sessions between its first and last without a tick
    absent_before: int = 0  # universe sessions before its first
    absent_after: int = 0  # universe sessions after its last
    outside_sessions: int = 0  # ticks outside the calendar's session hours (pre- and post-market)
    quote_rows: int = 0  # rows of the quotes joined with its trades
    factor_rows: int = 0
    crossed: int = 0
    dropped: int = 0
    spikes: int = 0
    spikes_dropped: int = 0


class UniverseReport(msgspec.Struct, frozen=True):
    """What a universe load did: the files, the calendar, and per symbol what was found."""

    paths: tuple[str, ...]
    quote_paths: tuple[str, ...]
    kind: str
    calendar: str
    sessions: int
    first: dt.date | None
    last: dt.date | None
    symbols: tuple[SymbolReport, ...]
    splits: tuple[Split, ...] = ()
    dividends: tuple[Dividend, ...] = ()
    probable_splits: tuple[ProbableSplit, ...] = ()  # split-sized jumps that read as splits
    split_sized_gaps: tuple[ProbableSplit, ...] = ()  # split-sized jumps whose volume reads as a market move
    empty_sessions: tuple[dt.date, ...] = ()  # universe sessions no symbol has a tick in
    trades_only: tuple[str, ...] = ()  # symbols with trades and no quotes (quotes were given)
    quotes_only: tuple[str, ...] = ()  # symbols with quotes and no trades

    def notes(self) -> list[str]:
        """The report as short lines for a terminal (the CLI prints them on stderr)."""
        span = f"{self.first} .. {self.last}" if self.first else "no sessions"
        n = len(self.symbols)
        out = [f"{n} symbol{'s' if n != 1 else ''} ({self.kind}) over {self.sessions} {self.calendar} sessions {span}"]
        for r in self.symbols:
            if r.spikes:
                did = f"dropped {r.spikes_dropped}" if r.spikes_dropped else "kept as is"
                out.append(f"{r.symbol}: {r.spikes} one-row price spike{'s' if r.spikes != 1 else ''} "
                           f"(far from both neighbours): {did}")
            if r.crossed:
                did = f"dropped {r.dropped}" if r.dropped else "kept as is"
                out.append(f"{r.symbol}: {r.crossed} crossed quote{'s' if r.crossed != 1 else ''} (ask < bid): {did}")
            if r.missing:
                out.append(f"{r.symbol}: no bars in {len(r.missing)} session{'s' if len(r.missing) != 1 else ''} "
                           f"({_dates(r.missing)}); not filled")
            if r.absent_before or r.absent_after:
                out.append(f"{r.symbol}: data from {r.first} to {r.last} ({r.absent_before} sessions before, "
                           f"{r.absent_after} after, without it)")
            if r.outside_sessions:
                out.append(f"{r.symbol}: {r.outside_sessions} ticks outside session hours (pre/post-market), kept")
        if self.empty_sessions:
            out.append(f"no symbol has data in {len(self.empty_sessions)} sessions ({_dates(self.empty_sessions)})")
        for s in self.splits:
            out.append(f"{s.symbol}: split {s.numerator}:{s.denominator} on {s.date} (factor file)")
        if self.dividends:
            out.append(f"{len(self.dividends)} dividends in the factor rows (adjusted series include them)")
        for p in self.probable_splits:
            fix = ("the factor rows do not explain it: add the split to the factor file" if p.adjusted
                   else "give a factor file (--factors) to adjust it")
            out.append(f"{p.symbol}: probable unadjusted split {p.numerator}:{p.denominator} on {p.date} "
                       f"({_jump_prices(p)}; {_split_evidence(p)}); {fix}")
        for p in self.split_sized_gaps:
            fix = ("add it to the factor file" if p.adjusted
                   else "give a factor file (--factors) to adjust it")
            out.append(f"{p.symbol}: a {p.numerator}:{p.denominator}-sized gap on {p.date} "
                       f"({_jump_prices(p)}) reads as a market move, not a split: "
                       f"{_gap_evidence(p)}; if it was a split, {fix}")
        if self.trades_only:
            out.append(f"trades without quotes: {', '.join(self.trades_only)}")
        if self.quotes_only:
            out.append(f"quotes without trades: {', '.join(self.quotes_only)}")
        return out


def _jump_prices(p: ProbableSplit) -> str:
    """`645.57 -> 92.69`, or on the adjusted series `adjusted 0.82 -> 0.43` (not the file's prices)."""
    return f"{'adjusted ' if p.adjusted else ''}{p.previous_close:g} -> {p.open:g}"


def _split_evidence(p: ProbableSplit) -> str:
    if p.volume_ratio is None or p.volume_spike is None:
        return "price only: no volume to tell it from a large gap"
    return f"volume after/before x{p.volume_ratio:.3g}, day/after x{p.volume_spike:.3g}"


def _gap_evidence(p: ProbableSplit) -> str:
    r = p.numerator / p.denominator
    if p.volume_spike is not None and p.volume_spike > SPIKE_LIMIT:
        return f"volume day/after x{p.volume_spike:.3g}, a one-day spike (a split's is near x1)"
    return f"volume after/before x{p.volume_ratio:.3g}, against a split's x{r:.3g}"


def _dates(days: tuple[dt.date, ...]) -> str:
    shown = ", ".join(d.isoformat() for d in days[:6])
    return shown + (f", ... {days[-1]}" if len(days) > 6 else "")


@dataclass(frozen=True, slots=True)
class LoadedUniverse:
    universe: Universe
    report: UniverseReport


_TRADE_KINDS = ("bars", "trades")
_QUOTE_KINDS = ("quotes", "quote_bars")


@dataclass(frozen=True, slots=True)
class TradesAndQuotes:
    """The files of one source split by layout: trade data and the quotes that join it."""

    trades: list[Path]
    quotes: list[Path]
    trade_roles: Roles
    quote_roles: Roles

    def mismatch(self, traded: set[str], quoted: set[str]) -> DataError:
        """The error of a source whose trade and quote files hold different symbols."""
        return DataError(self.quotes[0], f"mixed files: this one has {_layout(self.quote_roles)}, "
                         f"{self.trades[0].name} has {_layout(self.trade_roles)}; the files of one universe "
                         f"share one layout, or are the trades and quotes of the same symbols (the trades hold "
                         f"{symbols_text(sorted(traded)) or 'none'}, the quotes "
                         f"{symbols_text(sorted(quoted)) or 'none'})")


def _file_roles(f: Path, columns: ColumnMap | None, delimiter: str) -> Roles:
    """The column roles of file `f`, from its header (`DataError` for a headerless file or
    columns that cannot be told)."""
    header = file_header(f, delimiter)
    if header is None:
        raise DataError(f, "a headerless file: a universe's files need a header naming their columns")
    try:
        return infer_roles(header, columns)
    except ColumnError as e:
        raise DataError(f, str(e)) from None


def _layout_key(roles: Roles) -> tuple[str, frozenset[str]]:
    """What files of one layout share: their kind and column roles (the time column aside)."""
    return roles.kind, frozenset(roles.columns) - {"ts"}


def split_trades_quotes(files: list[Path], delimiter: str = ",") -> TradesAndQuotes | None:
    """The trade and quote files when the inferred layouts of `files` are exactly one of trade
    data and one of quotes; None otherwise (one layout, a file whose columns cannot be inferred,
    or more layouts: the load then says what is wrong with them)."""
    layouts: dict[tuple[str, frozenset[str]], tuple[Roles, list[Path]]] = {}
    for f in files:
        try:
            roles = _file_roles(f, None, delimiter)
        except DataError:
            return None
        layouts.setdefault(_layout_key(roles), (roles, []))[1].append(f)
    if len(layouts) != 2:
        return None
    (ra, fa), (rb, fb) = sorted(layouts.values(), key=lambda v: v[0].kind in _QUOTE_KINDS)
    if ra.kind in _TRADE_KINDS and rb.kind in _QUOTE_KINDS:
        return TradesAndQuotes(fa, fb, ra, rb)
    return None


def source_files(source: Source) -> list[Path]:
    """The files of a source: a file, a folder's *.csv and *.parquet files, a glob pattern, or
    a list of those; sorted by name, each once. None found is a `DataError`."""
    if isinstance(source, (str, Path)):
        text = str(source)
        p = Path(text)
        if p.is_file():
            return [p]
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in _SUFFIXES)
            if not files:
                raise DataError(p, "no data files (*.csv, *.parquet) in the folder")
            return files
        if any(c in text for c in "*?["):
            files = sorted(Path(f) for f in glob.glob(text) if Path(f).is_file())
            if not files:
                raise DataError(text, "the pattern matches no file")
            return files
        raise DataError(p, "no such file or folder")
    out: list[Path] = []
    for item in source:
        out.extend(f for f in source_files(item) if f not in out)
    if not out:
        raise DataError("(universe)", "no data files given")
    return out


def _layout(r: Roles) -> str:
    return f"{r.kind} ({', '.join(sorted(k for k in r.columns if k != 'ts'))})"


def _read(files: list[Path], columns: ColumnMap | None, options: dict[str, object],
          wanted: set[str] | None, held: set[str]) -> tuple[str, LoadSpec, dict[str, tuple[Path, Table]]]:
    """(kind, spec of the first file, symbol -> (file, its rows)) of the files; `held` gathers
    every symbol the files hold, wanted or not."""
    first: tuple[Path, Roles] | None = None
    spec: LoadSpec | None = None
    tables: dict[str, tuple[Path, Table]] = {}
    delimiter = str(options.get("delimiter", ","))
    for f in files:
        roles = _file_roles(f, columns, delimiter)
        if first is None:
            first = (f, roles)
        elif _layout_key(roles) != _layout_key(first[1]):
            raise DataError(f, f"mixed files: this one has {_layout(roles)}, {first[0].name} has "
                            f"{_layout(first[1])}; the files of one universe share one layout")
        fspec = column_spec(roles, symbol=plausible_symbol(f), **options)
        spec = spec or fspec
        table = read_table(f, fspec)
        if table.symbols is None:
            if fspec.symbol == "UNKNOWN":
                raise DataError(f, "cannot tell this file's symbol: name the file after it (AAPL.csv) or add a "
                                "symbol column")
            parts = [(fspec.symbol, table)]
            held.add(fspec.symbol)
        else:
            names = sorted(set(table.symbols.tolist()))
            held.update(names)
            parts = [(s, table.keep(table.symbols == s)) for s in names if wanted is None or s in wanted]
        for sym, part in parts:
            if wanted is not None and sym not in wanted:
                continue
            if sym in tables:
                raise DataError(f, f"symbol {sym} is also in {tables[sym][0]}: give each symbol's rows once")
            tables[sym] = (f, part)
    assert first is not None and spec is not None
    return first[1].kind, spec, tables


def _assemble_all(tables: dict[str, tuple[Path, Table]], spec: LoadSpec, terms: Mapping[str, SymbolTerms],
                  crossed: CrossedPolicy, spikes: SpikePolicy, spike_factor: float) -> dict[str, Loaded]:
    out: dict[str, Loaded] = {}
    for sym in sorted(tables):
        path, table = tables[sym]
        t = terms.get(sym, SymbolTerms())
        lot = t.lot_size
        whole = lot == lot.to_integral_value() and lot >= 1  # a board lot: whole units, at least `lot`
        out[sym] = assemble(table, spec, crossed, None, sym, t.tick_size, spikes,
                            spike_factor, t.multiplier, t.currency, int(lot) if whole else None,
                            lot_size=None if whole else float(lot))
    return out


def _joined(trades: Loaded, quotes: Loaded, terms: SymbolTerms, calendar: str) -> MarketData:
    a, b = trades.data, quotes.data
    ticks = join_quotes(a.ticks, b.ticks)
    tick = terms.tick_size
    if tick is None:
        tick = infer_tick_size(np.concatenate((a.ticks.last, b.ticks.bid, b.ticks.ask)))
    inst = a.instrument
    instrument = Instrument(symbol=a.symbol, tick_size=float(tick), multiplier=inst.multiplier,
                            currency=inst.currency, min_qty=inst.min_qty, lot_size=inst.lot_size)
    sessions = build_sessions(ticks.ts, "exchange", calendar)
    return MarketData(a.symbol, float(tick), ticks, sessions, b.crossed_kept, instrument)


def load_universe(
    source: Source,
    *,
    columns: ColumnMap | str | None = None,
    quotes: Source | None = None,
    quote_columns: ColumnMap | str | None = None,
    symbols: Sequence[str] | None = None,
    instruments: str | Path | Mapping[str, SymbolTerms] | None = None,
    factors: str | Path | Mapping[str, tuple[FactorRow, ...]] | None = None,
    calendar: str = "XNYS",
    crossed: CrossedPolicy = "error",
    spikes: SpikePolicy = "error",
    spike_factor: float = DEFAULT_SPIKE_FACTOR,
    delimiter: str = ",",
    bar_seconds: int = 60,
) -> LoadedUniverse:
    """Load a universe (module docstring). `symbols` selects (each must be in the data);
    `instruments` is a symbols table path or symbol -> `SymbolTerms`; `factors` a factor file
    (or folder) or symbol -> rows; `calendar` an exchange-calendars code. Raises `DataError`."""
    try:
        cmap = parse_columns(columns) if isinstance(columns, str) else columns
        qmap = parse_columns(quote_columns) if isinstance(quote_columns, str) else quote_columns
    except ColumnError as e:
        raise DataError("--columns", str(e).removeprefix("--columns: ")) from None
    wanted = None if symbols is None else {s.strip() for s in symbols if s.strip()}
    if wanted is not None and not wanted:
        raise DataError("--symbols", "is empty: give symbols like AAPL,MSFT")
    terms: Mapping[str, SymbolTerms] = (read_symbols(instruments) if isinstance(instruments, (str, Path))
                                        else instruments or {})
    rows: Mapping[str, tuple[FactorRow, ...]] = (read_factor_file(factors) if isinstance(factors, (str, Path))
                                                 else factors or {})
    try:
        check_calendar(calendar)
    except CalendarError as e:
        raise DataError("--calendar", str(e)) from None
    options: dict[str, object] = {"session": "exchange", "calendar": calendar, "delimiter": delimiter,
                                  "bar_seconds": bar_seconds}
    files = source_files(source)
    split = split_trades_quotes(files, delimiter) if quotes is None and columns is None and len(files) > 1 else None
    if split is not None:
        files, quotes = split.trades, split.quotes
    held: set[str] = set()
    kind, spec, tables = _read(files, cmap, options, wanted, held)
    if kind not in ("bars", "trades", "quotes", "quote_bars"):
        raise DataError(files[0], f"unsupported kind {kind}")
    loaded = _assemble_all(tables, spec, terms, crossed, spikes, spike_factor)
    quote_files: list[Path] = []
    quote_loaded: dict[str, Loaded] = {}
    if quotes is not None:
        if kind not in ("bars", "trades"):
            raise DataError(files[0], f"quotes join trade data (bars or trades); these files hold {kind}")
        quote_files = source_files(quotes)
        qkind, qspec, qtables = _read(quote_files, qmap, options, wanted, held)
        if split is not None and set(tables) != set(qtables):
            raise split.mismatch(set(tables), set(qtables))
        if qkind not in ("quotes", "quote_bars"):
            raise DataError(quote_files[0], f"the quotes files hold {qkind}, not quotes or quote bars")
        quote_loaded = _assemble_all(qtables, qspec, terms, crossed, spikes, spike_factor)
    if wanted is not None:
        absent = sorted(wanted - set(loaded) - set(quote_loaded))
        if absent:
            raise DataError(str(files[0]), f"no rows of symbol{'s' if len(absent) > 1 else ''} "
                            f"{', '.join(absent)} in the data (it holds {symbols_text(sorted(held))}; a symbol is "
                            "matched exactly, as the file spells it)")
    datas: dict[str, MarketData] = {}
    reports: dict[str, Loaded] = {}
    for sym in sorted(set(loaded) | set(quote_loaded)):
        if sym in loaded and sym in quote_loaded:
            datas[sym] = _joined(loaded[sym], quote_loaded[sym], terms.get(sym, SymbolTerms()), calendar)
        else:
            datas[sym] = (loaded.get(sym) or quote_loaded[sym]).data
        reports[sym] = loaded.get(sym) or quote_loaded[sym]
    sides = ((), ()) if quotes is None else (tuple(s for s in loaded if s not in quote_loaded),
                                             tuple(s for s in quote_loaded if s not in loaded))
    return _finish(datas, reports, quote_loaded, terms, rows, calendar,
                   kind if quotes is None else f"{kind} + quotes", files, quote_files, sides)


def _finish(datas: dict[str, MarketData], loaded: dict[str, Loaded], quote_loaded: dict[str, Loaded],
            terms: Mapping[str, SymbolTerms], rows: Mapping[str, tuple[FactorRow, ...]], calendar: str,
            kind: str, files: list[Path], quote_files: list[Path],
            sides: tuple[tuple[str, ...], tuple[str, ...]]) -> LoadedUniverse:
    held = [d for d in datas.values() if d.sessions]
    first = min((d.sessions[0].date for d in held), default=None)
    last = max((d.sessions[-1].date for d in held), default=None)
    sessions = exchange_sessions(calendar, first, last) if first and last else ()
    all_days = [s.date for s in sessions]
    members: list[Member] = []
    reports: list[SymbolReport] = []
    splits: list[Split] = []
    dividends: list[Dividend] = []
    probable: list[ProbableSplit] = []
    gaps: list[ProbableSplit] = []
    seen: set[dt.date] = set()
    for sym, data in datas.items():
        own = [s.date for s in data.sessions]
        seen.update(own)
        mine = set(own)
        lo = own[0] if own else None
        hi = own[-1] if own else None
        missing = tuple(d for d in all_days if lo and hi and lo <= d <= hi and d not in mine)
        t = data.ticks
        inside = int(np.sum(np.searchsorted(t.ts, data.session_close_ns, side="left")
                            - np.searchsorted(t.ts, data.session_open_ns, side="left")))
        factor_rows = rows.get(sym, ())
        adjusted = adjust(data, factor_rows)
        s, d = actions(sym, factor_rows, own)
        splits.extend(s)
        dividends.extend(d)
        for jump in split_sized_jumps(adjusted, adjusted=bool(factor_rows)):
            (probable if jump.verdict == "split" else gaps).append(jump)
        lot = terms.get(sym, SymbolTerms()).lot_size
        members.append(Member(sym, data, adjusted, Decimal(lot), factor_rows, missing))
        r = loaded[sym].report
        q = quote_loaded.get(sym)
        reports.append(SymbolReport(
            symbol=sym, path=r.path, kind=r.kind, rows=r.rows, ticks=len(t), sessions=len(own), first=lo, last=hi,
            tick_size=data.tick_size, tick_size_inferred=r.tick_size_inferred and terms.get(sym, SymbolTerms()).tick_size is None,
            missing=missing, absent_before=sum(1 for x in all_days if lo and x < lo),
            absent_after=sum(1 for x in all_days if hi and x > hi), outside_sessions=len(t) - inside,
            quote_rows=q.report.rows if q else 0, factor_rows=len(factor_rows),
            crossed=r.crossed + (q.report.crossed if q else 0), dropped=r.dropped + (q.report.dropped if q else 0),
            spikes=r.spikes + (q.report.spikes if q else 0),
            spikes_dropped=r.spikes_dropped + (q.report.spikes_dropped if q else 0)))
    key = lambda e: (e.date, e.symbol)  # noqa: E731
    splits.sort(key=key)
    dividends.sort(key=key)
    probable.sort(key=key)
    gaps.sort(key=key)
    universe = Universe(tuple(members), sessions, calendar, tuple(splits), tuple(dividends))
    report = UniverseReport(
        paths=tuple(str(f) for f in files), quote_paths=tuple(str(f) for f in quote_files), kind=kind,
        calendar=calendar, sessions=len(sessions), first=first, last=last, symbols=tuple(reports),
        splits=tuple(splits), dividends=tuple(dividends), probable_splits=tuple(probable),
        split_sized_gaps=tuple(gaps),
        empty_sessions=tuple(x for x in all_days if x not in seen),
        trades_only=sides[0], quotes_only=sides[1],
    )
    return LoadedUniverse(universe, report)


__all__ = ["LoadedUniverse", "Source", "SymbolReport", "UniverseReport", "load_universe", "source_files"]
