"""Sweep specs: a grid of agents x profiles x data files x days, expanded into run specs, and
the key that names a run.

Invariants:
- a `SweepRun` is everything that decides a run's bytes besides the code: agent, profile, data
  name, session dates, checkpoints, guard;
- `run_key` hashes the canonical JSON of the spec together with the data file's SHA-256 and
  the agent file's SHA-256 (for `fixed:`/`recorded:`/`replies:` agents), so editing the data or the plan
  gives a new key and a rerun never reuses a stale result;
- `expand` orders runs agent, profile, data, day (the order of the results table).
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

KEY_CHARS = 20


class SweepError(ValueError):
    """A bad grid (unknown field, empty axis, a date the data does not hold, ...)."""


class SweepRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One cell of a sweep: an agent under a profile on consecutive sessions (`dates`) of one
    data file. (A hosted session's inputs are `kestrel.session.spec.RunSpec`.)"""

    agent: str
    profile: str
    data: str
    dates: tuple[str, ...]
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300
    news: str | None = None  # a news file for the news pane (its SHA-256 is in the key)
    blind: bool = False


class _Keyed(msgspec.Struct, frozen=True):
    """A run without news or blind mode, as its key hashes it (the fields before those)."""

    agent: str
    profile: str
    data: str
    dates: tuple[str, ...]
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300


class Grid(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sweep: every agent x profile x data file x run of `days_per_run` sessions among the
    `days` sessions ending at `date` (default: each file's last sessions)."""

    agents: tuple[str, ...]
    profiles: tuple[str, ...] = ("balanced",)
    data: tuple[str, ...] = ("sample",)
    date: str | None = None
    days: int = 1
    days_per_run: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300
    news: str | None = None
    blind: bool = False

    def check(self) -> Grid:
        for name in ("agents", "profiles", "data"):
            values = getattr(self, name)
            if not values or any(not v.strip() for v in values):
                raise SweepError(f"the grid's {name} must name at least one value, none empty")
        if self.days < 1 or self.days_per_run < 1:
            raise SweepError(f"days and days_per_run must be >= 1, got {self.days} and {self.days_per_run}")
        if self.days % self.days_per_run:
            raise SweepError(f"days ({self.days}) must be a multiple of days_per_run ({self.days_per_run})")
        return self


class GridFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A grid file (`kestrel sweep grid.toml`): the grid plus where and how to run it."""

    agents: tuple[str, ...]
    out: str
    profiles: tuple[str, ...] = ("balanced",)
    data: tuple[str, ...] = ("sample",)
    date: str | None = None
    days: int = 1
    days_per_run: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300
    jobs: int | None = None
    scheduler: str | None = None
    news: str | None = None
    blind: bool = False

    @property
    def grid(self) -> Grid:
        return Grid(self.agents, self.profiles, self.data, self.date, self.days, self.days_per_run,
                    self.checkpoints, self.guard_s, self.news, self.blind).check()


def load_grid_file(path: str) -> GridFile:
    """Read a TOML grid file; fails with the file and the problem."""
    try:
        raw = tomllib.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise SweepError(f"cannot read grid file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: not valid TOML: {exc}") from None
    try:
        gf = msgspec.convert(raw, GridFile)
    except msgspec.ValidationError as exc:
        raise SweepError(f"{path}: {exc}") from None
    gf.grid  # validates
    return gf


def expand(grid: Grid, sessions_of: Callable[[str], Sequence[str]]) -> list[SweepRun]:
    """The grid's runs. `sessions_of(data)` lists the data's session dates (ISO, in order)."""
    grid.check()
    runs: list[SweepRun] = []
    picked: dict[str, list[str]] = {}
    for data in grid.data:
        dates = list(sessions_of(data))
        if not dates:
            raise SweepError(f"{data}: the data holds no session")
        end = len(dates) - 1
        if grid.date is not None:
            if grid.date not in dates:
                raise SweepError(f"{data}: no session on {grid.date}; sessions: {', '.join(dates)}")
            end = dates.index(grid.date)
        start = end - grid.days + 1
        if start < 0:
            raise SweepError(f"{data}: asked for {grid.days} days ending {dates[end]}, but the data holds "
                             f"only {end + 1} sessions up to it")
        picked[data] = dates[start:end + 1]
    for agent in grid.agents:
        for profile in grid.profiles:
            for data in grid.data:
                days = picked[data]
                for k in range(0, len(days), grid.days_per_run):
                    runs.append(SweepRun(agent.strip(), profile.strip(), data.strip(),
                                        tuple(days[k:k + grid.days_per_run]), tuple(grid.checkpoints), grid.guard_s,
                                        grid.news, grid.blind))
    return runs


def agent_file(agent: str) -> str | None:
    """The file a `fixed:`/`recorded:`/`replies:` agent spec reads, else None."""
    kind, _, arg = agent.partition(":")
    return arg if kind.strip().lower() in ("fixed", "recorded", "replies") and arg else None


def run_key(spec: SweepRun, data_sha256: str, agent_sha256: str | None = None,
            news_sha256: str | None = None) -> str:
    """The run's key (hex, see the module docstring; a run without news or blind mode keys as
    it did before those fields existed, so its results are found again)."""
    plain = spec.news is None and not spec.blind
    keyed: msgspec.Struct = _Keyed(spec.agent, spec.profile, spec.data, spec.dates, spec.checkpoints,
                                   spec.guard_s) if plain else spec
    h = hashlib.sha256(msgspec.json.encode(keyed, order="deterministic"))
    h.update(b"\ndata:" + data_sha256.encode())
    h.update(b"\nagent:" + (agent_sha256 or "-").encode())
    if news_sha256 is not None:
        h.update(b"\nnews:" + news_sha256.encode())
    return h.hexdigest()[:KEY_CHARS]


__all__ = ["Grid", "GridFile", "SweepRun", "SweepError", "agent_file", "expand", "load_grid_file", "run_key"]
