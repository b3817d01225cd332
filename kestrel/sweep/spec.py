"""Sweep specs: a grid of agents x profiles x data files x days x repeats, expanded into run
specs, and the key that names a run.

Invariants:
- a `SweepRun` is everything that decides a run's bytes besides the code: agent (a model
  agent's identity: provider, model, endpoint, effort, constraint, temperature; never its key
  variable, rate limits or concurrency, `kestrel.models.spec`), profile, data name, session
  dates, checkpoints, guard, the arm latency, and for repeated cells the repeat, its seed and
  the temperature;
- `run_key` hashes the canonical JSON of the spec together with the data file's SHA-256 and
  the agent file's SHA-256 (for `fixed:`/`recorded:`/`replies:` agents), so editing the data or the plan
  gives a new key and a rerun never reuses a stale result; the repeat, seed, temperature and
  arm latency enter the hash only when set, so a grid without repeats keys its runs as before;
- repeat r of a cell has seed `seed + r` (the grid's `seed`, 0 when not given) whenever the
  grid has repeats or a seed; distinct repeats have distinct seeds, recorded in the results;
- `expand` orders runs agent, profile, data, day, repeat (the order of the results table).
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from kestrel.models.spec import AgentSpecError, identity, is_model_spec, parse_spec

KEY_CHARS = 20
MAX_REPEATS = 1000


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
    repeat: int = 0
    seed: int | None = None  # sent to providers that take one (Chat Completions)
    temperature: float | None = None  # a model agent's sampling temperature (None: the provider's)
    # when a turn takes effect: None at its ordinal; SECONDS after it; "measured": after it by
    # the ordinal's model-call time (`SessionOptions.arm_latency`)
    arm_latency: float | Literal["measured"] | None = None
    news: str | None = None  # a news file for the news pane (its SHA-256 is in the key)
    blind: bool = False


OPTIONAL_KEY_FIELDS = {"repeat": 0, "seed": None, "temperature": None, "arm_latency": None, "news": None,
                       "blind": False}
"""`SweepRun` fields hashed into the key only when they differ from these defaults."""


class Grid(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sweep: every agent x profile x data file x run of `days_per_run` sessions among the
    `days` sessions ending at `date` (default: each file's last sessions) x `repeats`; model
    agents sample at `temperature` (unless their spec sets one) with seeds from `seed`."""

    agents: tuple[str, ...]
    profiles: tuple[str, ...] = ("balanced",)
    data: tuple[str, ...] = ("sample",)
    date: str | None = None
    days: int = 1
    days_per_run: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300
    repeats: int = 1
    seed: int | None = None
    temperature: float | None = None
    arm_latency: float | Literal["measured"] | None = None
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
        if not 1 <= self.repeats <= MAX_REPEATS:
            raise SweepError(f"repeats must be 1 to {MAX_REPEATS}, got {self.repeats}")
        if self.seed is not None and not 0 <= self.seed < 2**62:
            raise SweepError(f"seed must be a non-negative integer below 2^62, got {self.seed}")
        if self.temperature is not None and not (math.isfinite(self.temperature) and 0 <= self.temperature <= 2):
            raise SweepError(f"temperature must be from 0 to 2, got {self.temperature}")
        lat = self.arm_latency
        if lat is not None and lat != "measured" and not (math.isfinite(lat) and 0 <= lat <= 86_400):
            raise SweepError(f"arm latency must be 'measured' or seconds from 0 to 86400, got {lat!r}")
        for a in self.agents:
            if is_model_spec(a):
                try:
                    parse_spec(a)
                except AgentSpecError as exc:
                    raise SweepError(str(exc)) from None
        return self

    def seed_of(self, repeat: int) -> int | None:
        """Repeat `repeat`'s seed: `seed + repeat` when the grid repeats or names a seed, else None."""
        if self.repeats == 1 and self.seed is None:
            return None
        return (self.seed or 0) + repeat


class AgentRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One agent of a grid file as a table: `agent` is any `--agents` entry; the other fields
    are a model agent's options (`kestrel.models.spec`: `base_url` is its `@URL`, `key_env` its
    `key=`)."""

    agent: str
    base_url: str | None = None
    key_env: str | None = None
    effort: str | None = None
    constrain: str | None = None
    temperature: float | None = None
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None

    def spec(self) -> str:
        """The row as an agent spec string (`PROVIDER:MODEL@URL|key=...|...`)."""
        options = {"key": self.key_env, "effort": self.effort, "constrain": self.constrain,
                   "temperature": self.temperature, "rpm": self.rpm, "tpm": self.tpm,
                   "concurrency": self.concurrency}
        given = {k: v for k, v in options.items() if v is not None}
        if self.base_url is None and not given:
            return self.agent
        if not is_model_spec(self.agent):
            raise SweepError(f"agent {self.agent!r}: base_url, key_env, effort, constrain, temperature, rpm, "
                             "tpm and concurrency apply to model agents (PROVIDER:MODEL) only")
        text = self.agent + (f"@{self.base_url}" if self.base_url else "")
        text += "".join(f"|{k}={v}" for k, v in given.items())
        try:
            return parse_spec(text).format()
        except AgentSpecError as exc:
            raise SweepError(str(exc)) from None


class GridFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A grid file (`kestrel sweep grid.toml`): the grid plus where and how to run it."""

    agents: tuple[str | AgentRow, ...]
    out: str
    profiles: tuple[str, ...] = ("balanced",)
    data: tuple[str, ...] = ("sample",)
    date: str | None = None
    days: int = 1
    days_per_run: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = 300
    repeats: int = 1
    seed: int | None = None
    temperature: float | None = None
    arm_latency: float | Literal["measured"] | None = None
    jobs: int | None = None
    scheduler: str | None = None
    news: str | None = None
    blind: bool = False
    backend: str | None = None
    max_concurrency: tuple[str, ...] = ()
    max_usd: float | None = None
    max_tokens: int | None = None
    run_max_usd: float | None = None
    run_max_tokens: int | None = None
    reply_cache: str | None = None
    allow_failures: bool = False
    require_post_cutoff: bool = False

    @property
    def grid(self) -> Grid:
        agents = tuple(a if isinstance(a, str) else a.spec() for a in self.agents)
        return Grid(agents, self.profiles, self.data, self.date, self.days, self.days_per_run,
                    self.checkpoints, self.guard_s, self.repeats, self.seed, self.temperature,
                    self.arm_latency, self.news, self.blind).check()


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
        who = identity(agent)
        temperature = grid.temperature if is_model_spec(agent) and parse_spec(agent).temperature is None else None
        for profile in grid.profiles:
            for data in grid.data:
                days = picked[data]
                for k in range(0, len(days), grid.days_per_run):
                    for r in range(grid.repeats):
                        runs.append(SweepRun(who, profile.strip(), data.strip(), tuple(days[k:k + grid.days_per_run]),
                                             tuple(grid.checkpoints), grid.guard_s, r, grid.seed_of(r),
                                             temperature, grid.arm_latency, news=grid.news,
                                             blind=grid.blind))
    return runs


def agent_file(agent: str) -> str | None:
    """The file a `fixed:`/`recorded:`/`replies:` agent spec reads, else None."""
    kind, _, arg = agent.partition(":")
    return arg if kind.strip().lower() in ("fixed", "recorded", "replies") and arg else None


def run_key(spec: SweepRun, data_sha256: str, agent_sha256: str | None = None,
            news_sha256: str | None = None) -> str:
    """The run's key (hex, see the module docstring): the fields of `OPTIONAL_KEY_FIELDS` are
    hashed only when set, so a run without them keys as it did before they existed."""
    fields: dict[str, Any] = msgspec.to_builtins(spec)
    for name, default in OPTIONAL_KEY_FIELDS.items():
        if fields[name] == default:
            del fields[name]
    h = hashlib.sha256(msgspec.json.encode(fields, order="deterministic"))
    h.update(b"\ndata:" + data_sha256.encode())
    h.update(b"\nagent:" + (agent_sha256 or "-").encode())
    if news_sha256 is not None:
        h.update(b"\nnews:" + news_sha256.encode())
    return h.hexdigest()[:KEY_CHARS]


__all__ = ["AgentRow", "Grid", "GridFile", "OPTIONAL_KEY_FIELDS", "SweepRun", "SweepError", "agent_file", "expand",
           "load_grid_file", "run_key"]
