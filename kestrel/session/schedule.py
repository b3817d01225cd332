"""The simulate schedule: the authoring ordinals of one session.

Invariants:
- ordinal 0 is OPEN at the session open; optional checkpoints follow in time order, each
  strictly after the open and before the close, labelled by their wall-clock time ("10:30");
- an ordinal's snapshot is frozen at `time_ns - guard` (its cutoff); the guard is the authoring
  window, run by the incumbent plan; its terminal turn is armed at the ordinal's time and
  governs the ticks from there up to the next ordinal's time (or the close).
"""

from __future__ import annotations

from collections.abc import Sequence

from kestrel.frame.ordinal import Ordinal
from kestrel.market.session import NS_PER_S, SessionSpec
from kestrel.frame.snapshot import DEFAULT_GUARD_NS

DEFAULT_GUARD_S = DEFAULT_GUARD_NS // NS_PER_S
"""The snapshot guard, in seconds (the frame's default)."""


class ScheduleError(ValueError):
    """A checkpoint that is not a valid time inside the session."""


def parse_checkpoint(text: str) -> tuple[int, int]:
    """`"10:30"` → (10, 30), with a clear error otherwise."""
    parts = text.strip().split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        hour, minute = int(parts[0]), int(parts[1])
    except ValueError:
        raise ScheduleError(f"checkpoint {text.strip()!r} is not a time: write it as HH:MM") from None
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise ScheduleError(f"checkpoint {text.strip()!r} is out of range: HH 00-23, MM 00-59")
    return hour, minute


def ordinals(session: SessionSpec, checkpoints: Sequence[str] = ()) -> tuple[Ordinal, ...]:
    """OPEN plus the checkpoints, in time order."""
    out = [Ordinal(index=0, label="OPEN", time_ns=session.open_ns)]
    times: list[tuple[int, str]] = []
    for text in checkpoints:
        hour, minute = parse_checkpoint(text)
        t = session.wall_clock_ns(hour, minute)
        label = f"{hour:02d}:{minute:02d}"
        if not session.open_ns < t < session.close_ns:
            raise ScheduleError(
                f"checkpoint {label} is outside the session "
                f"({session.open:%H:%M}-{session.close:%H:%M} {session.tz}): pick a time after "
                "the open and before the close"
            )
        if any(label == seen for _, seen in times):
            raise ScheduleError(f"checkpoint {label} is listed twice")
        times.append((t, label))
    for i, (t, label) in enumerate(sorted(times), 1):
        out.append(Ordinal(index=i, label=label, time_ns=t))
    return tuple(out)


def ordinal_time_ns(session: SessionSpec, label: str) -> int:
    """The instant an ordinal `label` stands for ("OPEN" or a checkpoint's "hh:mm"), as
    `ordinals` computes it: a captured turn's label is enough to know when it took effect."""
    if label == "OPEN":
        return session.open_ns
    hour, minute = parse_checkpoint(label)
    return session.wall_clock_ns(hour, minute)


def cutoff_ns(ordinal: Ordinal, guard_s: int = DEFAULT_GUARD_S) -> int:
    return ordinal.time_ns - guard_s * NS_PER_S


__all__ = ["DEFAULT_GUARD_S", "ScheduleError", "cutoff_ns", "ordinals", "parse_checkpoint"]
