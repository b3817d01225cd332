"""Authoring ordinals: the points of a session where an agent is asked for a turn."""

from __future__ import annotations

import msgspec


class Ordinal(msgspec.Struct, frozen=True):
    """One authoring point: `index` in the schedule (0 = OPEN), a short `label` such as
    "OPEN" or "10:30", and the instant `time_ns` (UTC ns) it stands for. The snapshot for an
    ordinal is frozen at `time_ns - guard`."""

    index: int
    label: str
    time_ns: int
