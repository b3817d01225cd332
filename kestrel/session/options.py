"""`SessionOptions`: how a session runs, validated when it is built.

Invariants: a `SessionOptions` that exists has a guard of 0..86399 s and a known engine path
(`auto` or `reference`); the engine config it holds is itself valid (`EngineConfig`). It is a
msgspec Struct for validation and immutability only: it holds callbacks and the pane catalog,
so it is never encoded (what a run records is the `CaptureHeader`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from kestrel.data.source import DataSource
from kestrel.engine import ENGINE_PATHS, EnginePath
from kestrel.engine.config import EngineConfig
from kestrel.frame import DEFAULT_CATALOG, PaneCatalog
from kestrel.market import MarketData
from kestrel.market.news import NO_NEWS, NewsFeed
from kestrel.session.capture import CapturedTurn
from kestrel.session.defaults import scaled
from kestrel.session.loop import Evidence, LoopSettings
from kestrel.session.profiles import Policy
from kestrel.session.schedule import DEFAULT_GUARD_S, ScheduleError, parse_checkpoint
from kestrel.lang.suggest import closest
from kestrel.structs import check_fields

EvidenceSink = Callable[[Evidence], None]


class SessionError(ValueError):
    """Bad session inputs (an unknown date, no session in the data, ...)."""


def engine_path_of(text: str) -> EnginePath:
    """`text` as an engine path, or SessionError saying which ones exist."""
    for path in ENGINE_PATHS:
        if text == path:
            return path
    raise SessionError(
        f"unknown engine path {text!r}: use auto (fast path where it applies) or reference "
        "(always per tick)"
    )


class SessionOptions(msgspec.Struct, frozen=True):
    """How a session runs. `profile` is recorded in evidence only, never in ledger/capture."""

    checkpoints: tuple[str, ...] = ()
    guard_s: int = DEFAULT_GUARD_S
    settings: LoopSettings = LoopSettings()
    policy: Policy | None = None
    profile: str | None = None
    allowed_panes: tuple[str, ...] | None = None
    engine: EngineConfig = msgspec.field(default_factory=EngineConfig)
    catalog: PaneCatalog = DEFAULT_CATALOG
    data_name: str = "sample"
    engine_path: EnginePath = "auto"
    source: DataSource | None = None  # recorded in the capture header, checked by replay
    # when a turn takes effect: None at its ordinal's time (the default); SECONDS after it; or
    # "measured": after it by the authoring time (the ordinal's model calls' latency)
    arm_latency: float | Literal["measured"] | None = None
    # a replay's recorded arm moments: "DATE ORDINAL" -> nanoseconds after the ordinal (the
    # captured turns' `arm_delay_ns`); when given, they decide each turn's delay
    arm_delays: dict[str, int] | None = None
    # called with each terminal turn as it is taken (e.g. a `CaptureWriter` appending it)
    on_turn: Callable[[CapturedTurn], None] | None = None
    news: NewsFeed = NO_NEWS  # the headlines the news pane reads (cut at each snapshot's cutoff)
    blind: bool = False  # blind mode: the agent reads aliases, session numbers, rescaled prices
    # a universe session's ordinals: "open" (OPEN and the checkpoints) or "close" (one CLOSE per
    # session at its close, the whole bar seen; its turn takes effect at the next session's open)
    cadence: Literal["open", "close"] = "open"
    # a universe session's end-of-day policy: None carries for a universe of daily bars (a daily
    # strategy holds across sessions) and keeps the engine config's otherwise; set, it is used
    universe_end_of_day: Literal["flatten", "carry"] | None = None

    def __post_init__(self) -> None:
        engine_path_of(self.engine_path)  # the friendlier message for the likeliest mistake
        lat = self.arm_latency
        if lat is not None and lat != "measured" and not (isinstance(lat, (int, float)) and 0 <= lat <= 86_400):
            raise SessionError(f"arm latency must be 'measured' or seconds from 0 to 86400, got {lat!r}")
        try:
            check_fields(self, skip=("on_turn", "news"))  # a callable: msgspec cannot check it
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        if self.cadence == "close" and self.checkpoints:
            raise SessionError("the CLOSE cadence is one ordinal per session (at the close): drop the checkpoints "
                               "or use --cadence open")
        for text in self.checkpoints:
            try:
                parse_checkpoint(text)
            except ScheduleError as exc:
                raise SessionError(str(exc)) from None
        if self.allowed_panes is not None:
            known = self.catalog.names()
            if not self.allowed_panes:
                raise SessionError(
                    "allowed_panes is empty: the agent could request no pane at all; list the "
                    f"panes it may request ({', '.join(known)}) or pass None for all of them")
            for name in self.allowed_panes:
                if name not in self.catalog:
                    guess = closest(name, known)
                    raise SessionError(
                        f"allowed_panes names an unknown pane {name!r}"
                        + (f" (did you mean {guess!r}?)" if guess else "")
                        + f": the catalog has {', '.join(known)}")
        if not 0 <= self.guard_s < 86400:
            raise SessionError(
                f"guard must be 0 to 86399 seconds, got {self.guard_s} (a negative guard would "
                "let the snapshot see ticks after the ordinal)"
            )


def engine_config(options: SessionOptions, data: MarketData) -> EngineConfig:
    """The engine's config for `data`: the options' with the instrument's contract multiplier
    (money per price point per unit; one set in the options must agree with it), its lot size
    and the operator's default maxpos scaled to it (`kestrel.session.defaults`)."""
    cfg = options.engine
    mult = data.instrument.multiplier
    if cfg.multiplier != mult:
        if cfg.multiplier != 1.0:
            raise SessionError(
                f"the engine config's multiplier {cfg.multiplier:g} disagrees with the instrument's "
                f"{mult:g} ({data.symbol}); set the multiplier on the data's instrument")
        cfg = msgspec.structs.replace(cfg, multiplier=mult)
    try:
        return scaled(cfg, data)
    except ValueError as exc:
        raise SessionError(str(exc)) from None


__all__ = [
    "ENGINE_PATHS",
    "EnginePath",
    "EvidenceSink",
    "SessionError",
    "SessionOptions",
    "engine_config",
    "engine_path_of",
]
