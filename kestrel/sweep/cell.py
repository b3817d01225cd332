"""One cell of a sweep as its runs are written: the task, the files of its folder, its row's
keys, and the atomic commit of `runs/KEY` (shared by single-symbol and universe cells)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from kestrel.data.news import LoadedNews
from kestrel.report.stats.records import SessionRecord
from kestrel.sweep.spec import SweepRun

AgentFactory = Callable[[str], Any]
RESULT = "result.json"
SESSIONS = "sessions.json"
# the equal-size buy-and-hold of each run's sessions (`kestrel.report.stats.baselines`: the data and
# the execution model alone), stored as `buy_and_hold_<metric>` on its row
BASELINE_METRICS = ("net_pnl", "return_on_risk")


class RunAgents(Protocol):
    """An agent factory that builds each run's agent from its whole spec (seed, temperature)."""

    def for_run(self, run: SweepRun) -> Any: ...


class RunTask(msgspec.Struct, frozen=True):
    spec: SweepRun
    key: str
    out: str  # the sweep directory
    data_sha256: str
    news_sha256: str | None = None  # the news file's, when the run has one (in the key too)


class SessionsFile(msgspec.Struct, frozen=True):
    """`runs/KEY/sessions.json`: the run's per-session records and the reference agents'."""

    records: list[SessionRecord]
    baselines: list[SessionRecord]


def row_base(task: RunTask) -> dict[str, Any]:
    s = task.spec
    return {"key": task.key, "agent": s.agent, "model": None, "profile": s.profile, "data": s.data,
            "data_sha256": task.data_sha256, "dates": ",".join(s.dates), "checkpoints": ",".join(s.checkpoints),
            "repeat": s.repeat, "seed": s.seed, "temperature": s.temperature,
            "arm_latency": None if s.arm_latency is None else s.arm_latency if isinstance(s.arm_latency, str)
            else f"{s.arm_latency:g}",
            "blind": s.blind, "news": news_label(s.news, task.news_sha256)}


def news_label(path: str | None, sha256: str | None) -> str | None:
    """A run's news file as the results table names it: `NAME@SHA` (the file's name and the
    first 12 hex digits of its SHA-256), None without one."""
    if path is None:
        return None
    return f"{os.path.basename(path)}@{(sha256 or '')[:12]}" if sha256 else os.path.basename(path)


def build_agent(agent_factory: AgentFactory | RunAgents, spec: SweepRun) -> Any:
    """The run's agent: `agent_factory.for_run(spec)` when it has one, else `agent_factory(spec.agent)`."""
    for_run = getattr(agent_factory, "for_run", None)
    return for_run(spec) if callable(for_run) else agent_factory(spec.agent)  # type: ignore[operator]


def commit_run(out: Path, key: str, files: dict[str, bytes], folder: str = "runs") -> None:
    """Write `files` into `out/FOLDER/KEY` atomically (a temporary directory renamed into
    place); a failed run's folder replaces the one an earlier attempt left."""
    runs = out / folder
    runs.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=runs))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if folder != "runs" and (runs / key).is_dir():
            shutil.rmtree(runs / key, ignore_errors=True)
        try:
            os.rename(tmp, runs / key)
        except OSError:
            if folder != "runs" or not (runs / key / RESULT).exists():  # not a concurrent twin: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


_NEWS: dict[str, LoadedNews] = {}


def cached_news(path: str) -> LoadedNews:
    """The news file at `path`, loaded once per process."""
    loaded = _NEWS.get(path)
    if loaded is None:
        from kestrel.data.news import load_news

        loaded = _NEWS[path] = load_news(path)
    return loaded


def profile_options(spec: SweepRun, agent: Any) -> dict[str, Any]:
    """The `SessionOptions` fields a run's profile sets (loop settings, the iterative policy,
    the profile's name and panes); a model spec's own `effort=` wins over the profile's."""
    from kestrel.models.spec import is_model_spec, parse_spec
    from kestrel.session import profiles
    from kestrel.session.loop import LoopSettings

    profile = profiles.lookup(spec.profile)
    effort = parse_spec(spec.agent).effort if is_model_spec(spec.agent) else None
    resolved = profiles.resolve(profiles.Flags(agent=spec.agent, effort=effort), None, profile)
    st = resolved.settings
    iterative = bool(getattr(agent, "iterative", False))
    return {"settings": LoopSettings.of(st), "policy": resolved.policy if iterative else None,
            "profile": resolved.profile, "allowed_panes": st.panes}


__all__ = ["AgentFactory", "BASELINE_METRICS", "RESULT", "RunAgents", "RunTask", "SESSIONS", "SessionsFile",
           "build_agent", "cached_news", "commit_run", "news_label", "profile_options", "row_base"]
