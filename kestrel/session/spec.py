"""`RunSpec`: a session's inputs as one msgspec record, resolved to data and options.

The surfaces that start sessions from messages (the MCP server, the daemon) describe a run as a
`RunSpec` (a plain record: it crosses a socket and is stored as is) and `resolve_run` turns it
into the data, the `SessionOptions` and the checked schedule, exactly as `kestrel simulate`
resolves its flags (explicit flag > profile > default through `profiles.resolve`). Every bad
field fails here with a one-line `SpecError` saying what was wrong, before anything runs.

Data names follow the capture header's `data` field: `sample`, `sample|seed=N`, or a CSV /
Parquet path with optional `|preset=...|crossed=...|symbol=...`; `resolve_run` keeps the name it
loaded as `options.data_name`, so the capture of a hosted run replays with `kestrel replay`.

`estimate_usage` is the documented estimate for an agent that reports no token counts: the
frame's deterministic estimator (`kestrel.frame.text.estimate_tokens`) over the request
(briefing + repair error) as input and over the reply as output.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kestrel.data.errors import DataError
from kestrel.data.news import load_news
from kestrel.data.source import DataSource
from kestrel.market.news import NO_NEWS
from kestrel.market import MarketData
from kestrel.frame.text import estimate_tokens
from kestrel.session import profiles
from kestrel.session.loop import LoopSettings
from kestrel.session.options import engine_path_of
from kestrel.session.protocol import AuthorRequest, Usage
from kestrel.session.runner import SessionDay, SessionError, SessionOptions, session_days
from kestrel.session.schedule import DEFAULT_GUARD_S, ScheduleError

EFFORTS = ("low", "medium", "high")
MAX_DAYS = 366


class SpecError(ValueError):
    """A run spec that cannot run (the text says what was wrong and how to fix it)."""


class RunSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a hosted session runs on and how its authoring loop is postured."""

    data: str = "sample"
    date: str | None = None
    days: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = DEFAULT_GUARD_S
    profile: str | None = None
    max_iterations: int | None = None
    token_budget: int | None = None
    effort: str | None = None
    self_correct: bool = False
    engine_path: str = "auto"
    news: str | None = None  # a news file for the news pane (recorded with its SHA-256)
    blind: bool = False  # blind mode (`kestrel.frame.blind`)


@dataclass(frozen=True)
class ResolvedRun:
    """A spec made runnable: the data, the options, the date and day count, the schedule."""

    spec: RunSpec
    data: MarketData
    options: SessionOptions
    date: dt.date | None
    days: int
    schedule: list[SessionDay]


def data_name(data: str) -> str:
    """The canonical name of `data`: `sample[|seed=N]` as is, a path made absolute (so a
    capture names a file any working directory can load)."""
    head, sep, opts = data.strip().partition("|")
    if head == "sample":
        return data.strip()
    if not head:
        raise SpecError("data must be 'sample' or the path of a CSV/Parquet file, got an empty name")
    return str(Path(head).expanduser().resolve()) + sep + opts


def load_named(name: str) -> MarketData:
    """Load the data a spec names (see the module docstring)."""
    return open_named(name)[0]


def open_named(name: str, data: MarketData | None = None) -> tuple[MarketData, DataSource]:
    """The data a spec names and its `DataSource` (what the capture header records, so the
    run replays under `kestrel replay`'s checks). `data`, when given, is that data already
    loaded (a cache's); the file is still hashed, so the source proves what was run."""
    from kestrel.data import DataError, generate, load, load_sample
    from kestrel.data.sample import SAMPLE_SPEC, sample_seed
    from kestrel.data.source import DataSource, file_sha256, sample_source

    head, *opts = name.split("|")
    kv: dict[str, str] = {}
    for o in opts:
        k, _, v = o.partition("=")
        kv[k] = v
    try:
        if head == "sample":
            seed = sample_seed(kv["seed"], f"the seed in data {name!r}") if "seed" in kv else None
            if data is None:
                data = load_sample() if seed is None else generate(SAMPLE_SPEC, seed)
            return data, sample_source(data, seed)
        crossed = kv.get("crossed", "error")
        if data is None:
            data = load(head, kv.get("preset"), crossed=crossed,  # type: ignore[arg-type]
                        symbol=kv.get("symbol")).data
        inst = data.instrument
        source = DataSource(kind="file", symbol=data.symbol, tick_size=data.tick_size,
                            multiplier=inst.multiplier, currency=inst.currency, path=head,
                            sha256=file_sha256(head), preset=kv.get("preset"),
                            crossed=crossed)  # type: ignore[arg-type]
        return data, source
    except (DataError, OSError, ValueError) as exc:
        raise SpecError(str(exc)) from None


def resolve_run(spec: RunSpec, data: MarketData | None = None) -> ResolvedRun:
    """Check every field of `spec` and resolve it (see the module docstring). `data`, when
    given, is the already loaded data `spec.data` names (a cache of the caller's)."""
    if not 1 <= spec.days <= MAX_DAYS:
        raise SpecError(f"days must be 1 to {MAX_DAYS}, got {spec.days}")
    if not 0 <= spec.guard_s < 86400:
        raise SpecError(f"guard_s must be 0 to 86399 seconds, got {spec.guard_s}")
    for field, value in (("max_iterations", spec.max_iterations), ("token_budget", spec.token_budget)):
        if value is not None and value < 1:
            raise SpecError(f"{field} must be >= 1, got {value}")
    if spec.effort is not None and spec.effort not in EFFORTS:
        raise SpecError(f"effort must be one of {', '.join(EFFORTS)}, got {spec.effort!r}")
    try:
        profile = profiles.lookup(spec.profile) if spec.profile is not None else None
    except profiles.ProfileError as exc:
        raise SpecError(str(exc)) from None
    date: dt.date | None = None
    if spec.date is not None:
        try:
            date = dt.date.fromisoformat(spec.date.strip())
        except ValueError:
            raise SpecError(f"date must be YYYY-MM-DD, got {spec.date!r}") from None
    flags = profiles.Flags(
        view_request_cap=spec.max_iterations,
        authoring_token_budget=spec.token_budget,
        effort=spec.effort,
        self_correct=spec.self_correct,
    )
    resolved = profiles.resolve(flags, None, profile)
    name = data_name(spec.data)
    feed = NO_NEWS
    try:
        market, source = open_named(name, data)
        if spec.news is not None:
            loaded = load_news(Path(spec.news).expanduser())
            feed, source = loaded.feed, msgspec.structs.replace(source, news=loaded.source)
    except DataError as exc:
        raise SpecError(str(exc)) from None
    try:
        options = SessionOptions(
            checkpoints=tuple(c.strip() for c in spec.checkpoints if c.strip()),
            guard_s=spec.guard_s,
            settings=LoopSettings.of(resolved.settings),
            policy=resolved.policy,
            profile=resolved.profile,
            data_name=name,
            engine_path=engine_path_of(spec.engine_path),
            source=source,
            news=feed,
            blind=spec.blind,
        )
        schedule = session_days(market, options, date, spec.days)
    except (SessionError, ScheduleError) as exc:
        raise SpecError(str(exc)) from None
    return ResolvedRun(spec, market, options, date, spec.days, schedule)


def estimate_usage(request: AuthorRequest, reply: str) -> Usage:
    """The documented usage estimate for an agent that reports none (module docstring)."""
    asked = request.briefing + (request.repair_error or "")
    return Usage(input=estimate_tokens(asked), output=estimate_tokens(reply))




_BUDGET_LINE = re.compile(r"(\d+) view requests or repairs left, (\d+) tokens left")


def budget_left(briefing: str) -> tuple[int, int] | None:
    """(iterations, tokens) left, read from the budget line the runtime renders into every
    iterative briefing (`kestrel.session.ports`); None for a single-shot briefing."""
    m = _BUDGET_LINE.search(briefing)
    return None if m is None else (int(m.group(1)), int(m.group(2)))


__all__ = [
    "EFFORTS",
    "ResolvedRun",
    "RunSpec",
    "SpecError",
    "budget_left",
    "data_name",
    "estimate_usage",
    "load_named",
    "open_named",
    "resolve_run",
]
