"""The days of a run: which sessions (`pick_sessions`), and each one's schedule and tick
stretches (`SessionDay`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from kestrel.market import MarketData, SessionSpec
from kestrel.frame import Ordinal
from kestrel.market.ticks import Ticks
from kestrel.session.coverage import Coverage, coverage, default_session_index
from kestrel.session.options import SessionError, SessionOptions
from kestrel.session.schedule import ScheduleError, cutoff_ns, ordinals


def pick_sessions(data: MarketData, date: dt.date | None = None, days: int = 1) -> list[SessionSpec]:
    """The `days` sessions ending at `date` (default: the data's last COMPLETE session, else its
    most covered one, see `kestrel.session.coverage`)."""
    if not data.sessions:
        raise SessionError("the data holds no session: load data with a session schedule")
    if days < 1:
        raise SessionError(f"--days must be >= 1, got {days}")
    if date is None:  # at least `days` sessions when the data holds them (the default may be early)
        end = min(max(default_session_index(data), days - 1), len(data.sessions) - 1)
    else:
        found = [i for i, s in enumerate(data.sessions) if s.date == date]
        if not found:
            have = ", ".join(s.date.isoformat() for s in data.sessions)
            raise SessionError(f"no session on {date.isoformat()} in the data; sessions: {have}")
        end = found[0]
    start = end - days + 1
    if start < 0:
        raise SessionError(
            f"asked for {days} days ending {data.sessions[end].date.isoformat()}, but the data "
            f"holds only {end + 1} sessions up to it"
        )
    return list(data.sessions[start : end + 1])


@dataclass
class SessionDay:
    """One session's schedule and ticks: ordinals, their cutoffs, and the tick ranges the
    engine takes: `stretch(2i)` runs up to ordinal i's cutoff (the snapshot's), `stretch(2i+1)`
    from the cutoff to the ordinal's time (the authoring window, under the incumbent plan);
    the turn is armed after it; `stretch(2n)` runs to the close (n ordinals)."""

    data: MarketData
    session: SessionSpec
    ordinals: tuple[Ordinal, ...]
    guard_s: int
    ticks: Ticks = field(init=False)
    bounds: list[int] = field(init=False)
    armed_at: dict[int, int] = field(init=False, default_factory=dict)  # ordinal -> when its turn took effect

    def __post_init__(self) -> None:
        t = self.data.ticks
        lo = t.index_at(self.session.open_ns, side="left")
        hi = t.index_at(self.session.close_ns, side="right")
        self.ticks = t.slice(lo, hi)
        for before, o in zip(self.ordinals, self.ordinals[1:]):
            if self.cutoff(o) < before.time_ns:
                raise ScheduleError(
                    f"checkpoint {o.label} is within the {self.guard_s} s guard of "
                    f"{before.label}: its snapshot would be frozen before {before.label}'s turn "
                    "takes effect; space checkpoints further apart or shorten --guard")
        cuts: list[int] = [0]
        for o in self.ordinals:
            cuts += [self.ticks.index_at(self.cutoff(o)), self.ticks.index_at(o.time_ns)]
        self.bounds = [max(cuts[: i + 1]) for i in range(len(cuts))]

    @classmethod
    def of(cls, data: MarketData, session: SessionSpec, checkpoints: Sequence[str], guard_s: int) -> SessionDay:
        return cls(data, session, ordinals(session, checkpoints), guard_s)

    @property
    def date(self) -> str:
        return self.session.date.isoformat()

    def cutoff(self, o: Ordinal) -> int:
        return cutoff_ns(o, self.guard_s)

    @property
    def coverage(self) -> Coverage:
        """How the data covers this session (complete or partial)."""
        return coverage(self.data, self.session)

    @property
    def stretches(self) -> int:
        """How many stretches the day has: two per ordinal and the tail."""
        return 2 * len(self.ordinals) + 1

    def stretch(self, k: int) -> Ticks:
        """The k-th stretch of ticks (see the class docstring)."""
        hi = self.bounds[k + 1] if k + 1 < len(self.bounds) else len(self.ticks)
        return self.ticks.slice(self.bounds[k], hi)

    def segment(self, i: int) -> Ticks:
        """Ticks the engine takes before ordinal `i`'s snapshot (up to its cutoff)."""
        return self.stretch(2 * i)

    def window(self, i: int) -> Ticks:
        """Ordinal `i`'s authoring window: from its cutoff up to its time (the incumbent runs)."""
        return self.stretch(2 * i + 1)

    def delay(self, i: int, latency_ns: int) -> int:
        """Ordinal `i`'s turn takes effect `latency_ns` after its time (an agent's thinking):
        its authoring window (`stretch(2i+1)`, under the incumbent) is extended to that instant,
        at most to the next ordinal's cutoff (or the close), and the next stretch starts there.
        Returns the instant. Call it before the window runs; `latency_ns` 0 changes nothing."""
        o = self.ordinals[i]
        nxt = self.cutoff(self.ordinals[i + 1]) if i + 1 < len(self.ordinals) else self.session.close_ns
        at = max(o.time_ns, min(o.time_ns + max(latency_ns, 0), nxt))
        k = 2 * i + 2
        cap = self.bounds[k + 1] if k + 1 < len(self.bounds) else len(self.ticks)
        self.bounds[k] = max(self.bounds[k], min(self.ticks.index_at(at), cap))
        self.armed_at[i] = at
        return at

    def arm_time(self, i: int) -> int:
        """When ordinal `i`'s turn takes effect: its time, or later (`delay`)."""
        return self.armed_at.get(i, self.ordinals[i].time_ns)

    def tail(self) -> Ticks:
        """Ticks after the last ordinal's time, to the close."""
        return self.stretch(2 * len(self.ordinals))


def session_days(
    data: MarketData, options: SessionOptions, date: dt.date | None = None, days: int = 1
) -> list[SessionDay]:
    """The `days` sessions ending at `date`, each with its schedule (fails on a bad date,
    day count or checkpoint before anything runs)."""
    sessions = pick_sessions(data, date, days)
    return [SessionDay.of(data, s, options.checkpoints, options.guard_s) for s in sessions]


__all__ = ["SessionDay", "pick_sessions", "session_days"]
