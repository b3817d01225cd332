"""Sweep cells over a universe: the data name is a universe (a long-format file with a `symbol`
column, a folder or a glob of per-symbol files), optionally `PATH|symbols=A+B|capital=N`, and
each cell is one portfolio session (`kestrel.session.portfolio.run_portfolio`) on one account.

Invariants:
- a universe's SHA-256 (in every run key) hashes each file it reads, by its name relative to
  the folder (or its base name) in sorted order, so editing, adding or removing a member file
  gives new keys;
- a cell's per-session records are the changes of the run's marked equity over each session
  (from the previous session's close, the capital first), return on the capital, and the
  per-minute changes of its equity over the capital, the same cut as the reference portfolios'
  (`kestrel.report.stats.baselines.universe_baseline_records`), which are the leaderboard's
  baselines: equal-weight buy-and-hold and cash, from the universe, the sessions and the
  capital alone, never from the agents the sweep holds;
- `runs/KEY/capture.json` is a portfolio capture (`kestrel.session.portfolio_capture`), so
  `kestrel replay runs/KEY/capture.json --expect-ledger runs/KEY/ledger.jsonl` reproduces the
  cell's ledger.
"""

from __future__ import annotations

import glob as globs
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import msgspec

from kestrel.market.universe import Universe

DEFAULT_CAPITAL = 100_000.0
_UNIVERSES: dict[str, Universe] = {}
_LOCK = threading.RLock()


class UniverseName(msgspec.Struct, frozen=True):
    """A universe data name read: the path, the symbols chosen (None: all) and the capital."""

    path: str
    symbols: tuple[str, ...] | None = None
    capital: float = DEFAULT_CAPITAL


def parse_name(name: str) -> UniverseName:
    """`PATH|symbols=A+B|capital=N` read (raises ValueError on an unknown option or a bad value)."""
    head, *opts = name.split("|")
    symbols: tuple[str, ...] | None = None
    capital = DEFAULT_CAPITAL
    for o in opts:
        k, _, v = o.partition("=")
        if k == "symbols":
            symbols = tuple(s.strip() for s in v.split("+") if s.strip())
            if not symbols:
                raise ValueError(f"{name}: symbols= is empty; give symbols like symbols=AAPL+MSFT")
        elif k == "capital":
            try:
                capital = float(v)
            except ValueError:
                capital = -1.0
            if not capital > 0:
                raise ValueError(f"{name}: capital= must be a positive amount, got {v!r}")
        else:
            raise ValueError(f"{name}: unknown universe option {k!r}; a universe takes symbols=A+B and capital=N")
    return UniverseName(head.strip(), symbols, capital)


def is_universe_name(name: str) -> bool:
    """Whether the data name is a universe: a folder, a glob, a universe option, or a data file
    with a `symbol` column, unless `symbol=` picks one member."""
    head, _, opts = name.partition("|")
    head = head.strip()
    if head in ("", "sample") or head.startswith("sample ("):
        return False
    keys = {o.partition("=")[0] for o in opts.split("|")} if opts else set()
    if "symbol" in keys:  # one member of a long-format file: a single-symbol run
        return False
    if keys & {"symbols", "capital"} or Path(head).is_dir() or globs.has_magic(head):
        return True
    from kestrel.data import DataError
    from kestrel.data.readers import file_header

    try:
        header = file_header(head, ",")
    except (DataError, OSError):
        return False
    return header is not None and any(h.strip().lower() == "symbol" for h in header)


def member_files(path: str) -> list[tuple[str, str]]:
    """The files a universe path reads, as (name, absolute path), sorted by name."""
    if Path(path).is_dir():
        found = [(str(p.relative_to(path)), str(p)) for p in Path(path).rglob("*") if p.is_file()
                 and not p.name.startswith(".")]
    elif globs.has_magic(path):
        found = [(os.path.basename(p), os.path.abspath(p)) for p in globs.glob(path) if os.path.isfile(p)]
    else:
        found = [(os.path.basename(path), os.path.abspath(path))]
    return sorted(found)


def universe_sha256(name: str) -> str:
    """The SHA-256 over the universe's files (module docstring)."""
    from kestrel.report.source import file_sha256

    h = hashlib.sha256()
    for rel, p in member_files(parse_name(name).path):
        h.update(rel.encode() + b"\0" + file_sha256(p).encode() + b"\n")
    return h.hexdigest()


def load_universe_named(name: str) -> Universe:
    """The universe a data name reads, loaded once per process (thread-safe); raises ValueError
    (a `DataError` too) with the reason."""
    with _LOCK:
        u = _UNIVERSES.get(name)
        if u is None:
            from kestrel.data.universe import load_universe

            n = parse_name(name)
            u = _UNIVERSES[name] = load_universe(n.path, symbols=None if n.symbols is None else list(n.symbols)).universe
        return u


def universe_dates(name: str) -> list[str]:
    """The universe's session dates (ISO, in order)."""
    return [s.date.isoformat() for s in load_universe_named(name).sessions]


def portfolio_agent(spec: str, agent_factory: Any, run: Any) -> Any:
    """A universe cell's agent: `fixed:PLANS.kes` a module of plans ON each symbol, a model agent
    from the sweep's factory; any other kind is refused (it writes single-symbol plans)."""
    from kestrel.session.portfolio import ModuleAgent
    from kestrel.sweep.cell import build_agent

    kind, _, arg = spec.partition(":")
    if kind == "fixed" and arg:
        return ModuleAgent(Path(arg).read_text("utf-8"), Path(arg).stem)
    from kestrel.models.spec import is_model_spec

    if not is_model_spec(spec):
        raise ValueError(f"agent {spec!r} cannot trade a universe: give fixed:PLANS.kes (plans ON each symbol) or "
                         "a model agent (PROVIDER:MODEL)")
    return build_agent(agent_factory, run)


def execute_universe(task: Any, agent_factory: Any) -> dict[str, Any]:
    """Run, write and describe one universe cell (`kestrel.sweep.worker.execute` for a universe)."""
    import datetime as dt

    from kestrel.market.portfolio import PortfolioBounds
    from kestrel.report.portfolio import from_portfolio_run
    from kestrel.report.stats.baselines import curve_session_records, universe_baseline_records
    from kestrel.session.options import SessionOptions
    from kestrel.session.portfolio import run_portfolio
    from kestrel.session.portfolio_capture import UniverseSource, capture_bytes
    from kestrel.market.news import NO_NEWS
    from kestrel.sweep.cell import RESULT, SessionsFile, cached_news, commit_run, profile_options, row_base

    row = row_base(task)
    spec = task.spec
    try:
        name = parse_name(spec.data)
        universe = load_universe_named(spec.data)
        agent = portfolio_agent(spec.agent, agent_factory, spec)
        bounds = PortfolioBounds(capital=name.capital)
        news = cached_news(spec.news) if spec.news is not None else None
        options = SessionOptions(checkpoints=spec.checkpoints, guard_s=spec.guard_s, data_name=spec.data,
                                 blind=spec.blind, arm_latency=spec.arm_latency,
                                 news=news.feed if news is not None else NO_NEWS, **profile_options(spec, agent))
        result = run_portfolio(universe, agent, bounds, options, date=dt.date.fromisoformat(spec.dates[-1]),
                               days=len(spec.dates), news_sha256=None if news is None else news.source.sha256)
    except Exception as exc:  # a failing run is recorded, never stops the sweep
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        row["failure"] = "error"
        return row
    try:
        ledger = result.ledger.to_jsonl()
        rep = from_portfolio_run(result.engine, result.capture.dates)
        model = getattr(agent, "model", None) or None
        refs = universe_baseline_records(universe, list(spec.dates), data_name=spec.data, capital=name.capital)
        held = [r for r in refs if r.agent == "equal-weight buy-and-hold"]
        f = rep.figures
        row.update({"model": model, "net_pnl": f.net_pnl, "risk_capital": name.capital,
                    "return_on_risk": round(f.net_pnl / name.capital, 9), "max_drawdown": f.max_drawdown,
                    "max_drawdown_ts": f.max_drawdown_ts, "fills": rep.fills, "rejections": rep.rejections,
                    "trades": sum(a.trades for a in rep.attribution), "fees": round(sum(a.fees for a in rep.attribution), 9),
                    "turnover": round(sum(a.turnover for a in rep.attribution), 9), "currency": rep.currency,
                    "buy_and_hold_net_pnl": round(sum(r.net_pnl for r in held), 9),
                    "buy_and_hold_return_on_risk": round(sum(r.return_on_risk for r in held), 9),
                    "net_of_cost": f.net_pnl if rep.currency == "USD" and model is None else None,
                    "ledger_sha256": hashlib.sha256(ledger).hexdigest(), "failure": None, "error": None,
                    "leakage": None, "leakage_note": None, "spending_cap": None})
        source = UniverseSource(os.path.abspath(name.path))
        records = curve_session_records(rep.curve, result.engine.universe, spec.dates, name.capital,
                                            agent=spec.agent, profile=spec.profile, data=spec.data,
                                            repeat=spec.repeat, model=model, currency=rep.currency)
        files = {"capture.json": capture_bytes(source, result.capture, ledger, None if news is None else news.source),
                 "ledger.jsonl": ledger,
                 "sessions.json": msgspec.json.encode(SessionsFile(records, refs), order="deterministic") + b"\n",
                 RESULT: msgspec.json.encode(row, order="deterministic") + b"\n"}
        commit_run(Path(task.out), task.key, files)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        row["failure"] = "error"
    return row


__all__ = ["UniverseName", "execute_universe", "is_universe_name", "load_universe_named", "member_files",
           "parse_name", "portfolio_agent", "universe_dates", "universe_sha256"]
