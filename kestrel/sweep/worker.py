"""One sweep run, as executed in a worker process, on a worker thread, or in the caller.

`execute(task, agent_factory, data_loader, runner=None)` runs the session (`run_session` on
the pure core unless a `runner` is given: the actor shell on asyncio or trio), writes
`runs/KEY/{capture,ledger,evidence}.jsonl`, `sessions.json` (the run's per-session records and
the reference agents' records of its sessions, `kestrel.report.stats.baselines`) and `result.json`
into a temporary directory next to it and renames that directory into place, so `runs/KEY`
exists only complete. It never raises for a failing run: the failure comes back as a row with
`error` set, and what the run recorded (capture, ledger, evidence) is kept under
`failed/KEY/`:

- a run whose agent could not work (`SessionResult.failure`: a fatal error, every call
  failed) is `failure` "fatal" / "every-call-failed" with the reason as `error`;
- a run a spending cap cut: the run's own cap is a result (`spending_cap` "run", committed as
  any run); the sweep's cap makes it incomplete (`spending_cap` "sweep", kept under `failed/`
  with the reason, retried by the next sweep);
- a run whose agent or data could not even start is `failure` "error".

A universe cell (a data name `kestrel.sweep.universe.is_universe_name` accepts) is a portfolio
session instead (`kestrel.sweep.universe.execute_universe`), written the same way.

`agent_factory` is a module-level function of the agent spec (picklable for process pools and
Dask) or an object with `for_run(SweepRun)` (the sweep's model agents, built with its call
policy in this process); each process loads a data file once and keeps it for its later runs
(thread-safe).

The capture's header records the run's `DataSource` (a file's absolute path, SHA-256 and loading
options, or the sample's seed) and its engine config (the default execution model: a sweep has
no execution flags), so `kestrel replay runs/KEY/capture.jsonl --expect-ledger
runs/KEY/ledger.jsonl` reloads the same data, checks it and reproduces the ledger.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kestrel.data.source import DataSource
from kestrel.engine.config import EngineConfig
from kestrel.market.data import MarketData
from kestrel.market.news import NO_NEWS
from kestrel.sweep.cell import (
    BASELINE_METRICS,
    RESULT,
    SESSIONS,
    AgentFactory,
    RunAgents,
    RunTask,
    SessionsFile,
    build_agent,
    cached_news,
    commit_run,
    profile_options,
    row_base,
)
from kestrel.sweep.spec import SweepRun

DataLoader = Callable[[str], MarketData]
SessionRunner = Callable[..., Any]
"""`runner(data, agent, options, *, date, days, sink)` -> `SessionResult` (default `run_session`)."""
_DATA: dict[str, MarketData] = {}
_SOURCES: dict[str, DataSource] = {}
_LOCK = threading.RLock()


def cached_data(name: str, loader: DataLoader) -> MarketData:
    """The data named `name`, loaded once per process (thread-safe)."""
    with _LOCK:
        data = _DATA.get(name)
        if data is None:
            data = _DATA[name] = loader(name)
        return data


def cached_source(name: str, data: MarketData) -> DataSource:
    """The `DataSource` of the data named `name` (what the capture header records, so a sweep's
    capture replays under `kestrel replay`'s checks), built once per process: a file's absolute
    path, SHA-256 and loading options, or the sample's seed."""
    with _LOCK:
        source = _SOURCES.get(name)
        if source is None:
            from kestrel.session.spec import open_named

            source = open_named(name, data)[1]
            if source.path is not None:
                source = msgspec.structs.replace(source, path=os.path.abspath(source.path))
            _SOURCES[name] = source
        return source


def _options(spec: SweepRun, agent: Any, source: DataSource) -> Any:
    from kestrel.session.runner import SessionOptions

    feed = NO_NEWS
    if spec.news is not None:
        loaded = cached_news(spec.news)
        feed, source = loaded.feed, msgspec.structs.replace(source, news=loaded.source)
    return SessionOptions(checkpoints=spec.checkpoints, guard_s=spec.guard_s, data_name=spec.data,
                          engine=EngineConfig(), source=source, news=feed, blind=spec.blind,
                          arm_latency=spec.arm_latency, **profile_options(spec, agent))


def simulate(task: RunTask, agent_factory: AgentFactory | RunAgents, data_loader: DataLoader,
             runner: SessionRunner | None = None) -> tuple[Any, MarketData, Any]:
    """Run the task's session; returns (SessionResult, data, agent)."""
    from kestrel.session.runner import run_session

    spec = task.spec
    data = cached_data(spec.data, data_loader)
    agent = build_agent(agent_factory, spec)
    options = _options(spec, agent, cached_source(spec.data, data))
    result = (runner or run_session)(data, agent, options, date=dt.date.fromisoformat(spec.dates[-1]),
                                     days=len(spec.dates), sink=None)
    return result, data, agent


def _capped(result: Any, agent: Any) -> str | None:
    """Which spending cap stood an ordinal of the run down: "run" (its own), "sweep", or None."""
    if not any(e.kind == "agent-error" and e.failure == "spending-cap" for e in result.evidence):
        return None
    budgets = getattr(getattr(agent, "policy", None), "budgets", ())
    return "run" if any(b.name == "run" and b.refused for b in budgets) else "sweep"


def _leakage(row: dict[str, Any], spec: SweepRun) -> None:
    from kestrel.models.cutoff import leakage

    model = row.get("model")
    if not model:
        row["leakage"] = row["leakage_note"] = None
        return
    label = leakage(str(model), spec.dates, generated=spec.data.partition("|")[0] == "sample")
    row["leakage"], row["leakage_note"] = label.kind, label.text


def execute(task: RunTask, agent_factory: AgentFactory | RunAgents, data_loader: DataLoader,
            runner: SessionRunner | None = None) -> dict[str, Any]:
    """Run, write and describe one run (see the module docstring)."""
    from kestrel.report.stats.baselines import baseline_records
    from kestrel.report.run import from_result
    from kestrel.report.stats.records import session_records

    from kestrel.sweep.universe import execute_universe, is_universe_name

    if is_universe_name(task.spec.data):
        return execute_universe(task, agent_factory)
    row = row_base(task)
    spec = task.spec
    try:
        result, data, agent = simulate(task, agent_factory, data_loader, runner)
    except Exception as exc:  # a failing run is recorded, never stops the sweep
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        row["failure"] = "error"
        return row
    try:
        ledger = result.ledger_jsonl()
        model = getattr(agent, "model", None) or None
        rep = from_result(result, data, data_sha256=task.data_sha256, model=model, baselines=False)
        config = result.header.engine or EngineConfig()
        refs = baseline_records(data, spec.dates, data_name=spec.data, config=config)
        row["model"] = model
        row.update(msgspec.to_builtins(rep.metrics))
        held = [r for r in refs if r.agent == "buy-and-hold"]
        hold = round(sum(r.net_pnl for r in held), 9)
        row["buy_and_hold_net_pnl"] = hold
        row["buy_and_hold_return_on_risk"] = round(sum(r.return_on_risk for r in held), 9)
        row["currency"] = rep.header.currency
        cost = rep.metrics.cost_usd
        row["net_of_cost"] = (round(rep.metrics.net_pnl - (cost or 0.0), 9)
                              if rep.header.currency == "USD" and (cost is not None or model is None) else None)
        row["ledger_sha256"] = hashlib.sha256(ledger).hexdigest()
        _leakage(row, spec)
        row["spending_cap"] = capped = _capped(result, agent)
        failure = result.failure
        row["failure"] = None if failure is None else failure.kind
        row["error"] = None if failure is None else failure.line()
        if capped == "sweep" and failure is None:
            row["error"] = "spending cap: the sweep's cap stood the run down before its end (rerun with a higher cap)"
        evidence = b"".join(msgspec.json.encode(e) + b"\n" for e in result.evidence)
        files = {"capture.jsonl": result.capture_jsonl(), "ledger.jsonl": ledger, "evidence.jsonl": evidence}
        if row["error"]:  # what it recorded is kept, apart from the finished runs
            commit_run(Path(task.out), task.key, files, folder="failed")
            return row
        records = session_records(rep, profile=spec.profile, repeat=spec.repeat, agent=spec.agent)
        files["sessions.json"] = msgspec.json.encode(SessionsFile(records, refs), order="deterministic") + b"\n"
        files[RESULT] = msgspec.json.encode(row, order="deterministic") + b"\n"
        commit_run(Path(task.out), task.key, files)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        row["failure"] = "error"
    return row


__all__ = ["AgentFactory", "BASELINE_METRICS", "DataLoader", "RESULT", "RunAgents", "RunTask", "SESSIONS",
           "SessionRunner", "SessionsFile", "build_agent", "cached_data", "cached_source", "commit_run", "execute",
           "row_base", "simulate"]
