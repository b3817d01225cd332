"""One sweep run, as executed in a worker process (or in the caller, serially).

`execute(task, agent_factory, data_loader)` runs the session on the pure core (no actors),
writes `runs/KEY/{capture,ledger,evidence}.jsonl` and `result.json` into a temporary directory
next to it and renames that directory into place, so `runs/KEY` exists only complete. It never
raises for a failing run: the failure comes back as a row with `error` set. `agent_factory` and
`data_loader` are module-level functions (picklable for process pools and Dask); each process
loads a data file once and keeps it for its later runs.

The capture's header records the run's `DataSource` (a file's absolute path, SHA-256 and loading
options, or the sample's seed) and its engine config (the default execution model: a sweep has
no execution flags), so `kestrel replay runs/KEY/capture.jsonl --expect-ledger
runs/KEY/ledger.jsonl` reloads the same data, checks it and reproduces the ledger.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kestrel.data.news import LoadedNews
from kestrel.data.source import DataSource
from kestrel.engine.config import EngineConfig
from kestrel.market.data import MarketData
from kestrel.market.news import NO_NEWS
from kestrel.sweep.spec import SweepRun

AgentFactory = Callable[[str], Any]
DataLoader = Callable[[str], MarketData]
RESULT = "result.json"
# each run's buy-and-hold baseline (its sessions, in its largest position, as on its page),
# stored as `buy_and_hold_<metric>` for the leaderboard's reference row
BASELINE_METRICS = ("net_pnl", "return_on_risk", "sharpe", "max_drawdown")

_DATA: dict[str, MarketData] = {}
_SOURCES: dict[str, DataSource] = {}
_NEWS: dict[str, LoadedNews] = {}


class RunTask(msgspec.Struct, frozen=True):
    spec: SweepRun
    key: str
    out: str  # the sweep directory
    data_sha256: str


def cached_data(name: str, loader: DataLoader) -> MarketData:
    """The data named `name`, loaded once per process."""
    data = _DATA.get(name)
    if data is None:
        data = _DATA[name] = loader(name)
    return data


def cached_source(name: str, data: MarketData) -> DataSource:
    """The `DataSource` of the data named `name` (what the capture header records, so a sweep's
    capture replays under `kestrel replay`'s checks), built once per process: a file's absolute
    path, SHA-256 and loading options, or the sample's seed."""
    source = _SOURCES.get(name)
    if source is None:
        from kestrel.session.spec import open_named

        source = open_named(name, data)[1]
        if source.path is not None:
            source = msgspec.structs.replace(source, path=os.path.abspath(source.path))
        _SOURCES[name] = source
    return source


def row_base(task: RunTask) -> dict[str, Any]:
    s = task.spec
    return {"key": task.key, "agent": s.agent, "model": None, "profile": s.profile, "data": s.data,
            "data_sha256": task.data_sha256, "dates": ",".join(s.dates), "checkpoints": ",".join(s.checkpoints)}


def _options(spec: SweepRun, agent: Any, source: DataSource) -> Any:
    from kestrel.session import profiles
    from kestrel.session.loop import LoopSettings
    from kestrel.session.runner import SessionOptions

    profile = profiles.lookup(spec.profile)
    resolved = profiles.resolve(profiles.Flags(agent=spec.agent), None, profile)
    st = resolved.settings
    iterative = bool(getattr(agent, "iterative", False))
    feed = NO_NEWS
    if spec.news is not None:
        loaded = cached_news(spec.news)
        feed, source = loaded.feed, msgspec.structs.replace(source, news=loaded.source)
    return SessionOptions(checkpoints=spec.checkpoints, guard_s=spec.guard_s, settings=LoopSettings.of(st),
                          policy=resolved.policy if iterative else None, profile=resolved.profile,
                          allowed_panes=st.panes, data_name=spec.data, engine=EngineConfig(), source=source,
                          news=feed, blind=spec.blind)


def cached_news(path: str) -> LoadedNews:
    """The news file at `path`, loaded once per process."""
    loaded = _NEWS.get(path)
    if loaded is None:
        from kestrel.data.news import load_news

        loaded = _NEWS[path] = load_news(path)
    return loaded


def simulate(task: RunTask, agent_factory: AgentFactory, data_loader: DataLoader) -> tuple[Any, MarketData, Any]:
    """Run the task's session; returns (SessionResult, data, agent)."""
    from kestrel.session.runner import run_session

    spec = task.spec
    data = cached_data(spec.data, data_loader)
    agent = agent_factory(spec.agent)
    evidence: list[Any] = []
    options = _options(spec, agent, cached_source(spec.data, data))
    result = run_session(data, agent, options, date=dt.date.fromisoformat(spec.dates[-1]),
                         days=len(spec.dates), sink=evidence.append)
    return result, data, agent


def execute(task: RunTask, agent_factory: AgentFactory, data_loader: DataLoader) -> dict[str, Any]:
    """Run, write and describe one run (see the module docstring)."""
    from kestrel.report.run import from_result

    row = row_base(task)
    try:
        result, data, agent = simulate(task, agent_factory, data_loader)
        ledger = result.ledger_jsonl()
        model = getattr(agent, "model", None) or None
        rep = from_result(result, data, data_sha256=task.data_sha256, model=model)
        row["model"] = model
        row.update(msgspec.to_builtins(rep.metrics))
        hold = rep.baselines.get("buy-and-hold")
        for m in BASELINE_METRICS:
            row[f"buy_and_hold_{m}"] = None if hold is None else getattr(hold, m)
        row["ledger_sha256"] = hashlib.sha256(ledger).hexdigest()
        row["error"] = None
        evidence = b"".join(msgspec.json.encode(e) + b"\n" for e in result.evidence)
        _commit(Path(task.out), task.key, {
            "capture.jsonl": result.capture_jsonl(), "ledger.jsonl": ledger, "evidence.jsonl": evidence,
            RESULT: msgspec.json.encode(row, order="deterministic") + b"\n"})
    except Exception as exc:  # a failing run is recorded, never stops the sweep
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return row


def _commit(out: Path, key: str, files: dict[str, bytes]) -> None:
    """Write `files` into `out/runs/KEY` atomically (a temporary directory renamed into place)."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=runs))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        try:
            os.rename(tmp, runs / key)
        except OSError:
            if not (runs / key / RESULT).exists():  # not a concurrent twin: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["AgentFactory", "BASELINE_METRICS", "DataLoader", "RESULT", "RunTask", "cached_data", "cached_source", "execute", "simulate"]
