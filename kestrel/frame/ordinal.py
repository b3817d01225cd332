"""Authoring ordinals: the points of a session where an agent is asked for a turn."""

from __future__ import annotations

import re

import msgspec

from kestrel.market.session import SessionSpec


class Ordinal(msgspec.Struct, frozen=True):
    """One authoring point: `index` in the schedule (0 = OPEN), a short `label` such as
    "OPEN" or "10:30", and the instant `time_ns` (UTC ns) it stands for. The snapshot for an
    ordinal is frozen at `time_ns - guard`."""

    index: int
    label: str
    time_ns: int


class AtError(ValueError):
    """A view instant that is not a time hh:mm within the session (the message says which)."""


_TOD = re.compile(r"^(\d{1,2}):(\d{2})$")


def view_ordinal(session: SessionSpec, at: str, *, flag: str = "--at", where: str = "the last session") -> Ordinal:
    """The ordinal a view at wall-clock `at` (hh:mm, the session's timezone) stands for: OPEN at
    the open, else a checkpoint. Raises `AtError` for anything but a time from the open to the
    close of `session` (`flag` and `where` name the input and the session in the message)."""
    label = at.strip()
    m = _TOD.match(label)
    if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise AtError(f"{flag} must be a time hh:mm, got {at!r}")
    at_ns = session.wall_clock_ns(int(m.group(1)), int(m.group(2)))
    if not session.open_ns <= at_ns <= session.close_ns:
        raise AtError(
            f"{flag} {label} is outside {where} ({session.open:%H:%M}-{session.close:%H:%M} "
            f"{session.tz} on {session.date}); give a time within it")
    return Ordinal(0 if at_ns <= session.open_ns else 1, label, at_ns)
