"""Supervision policies: what happens when an actor's handler raises.

The policy is declared per actor at spawn time and applied by its supervisor (its parent,
or the system for a top-level actor):

- `Restart(max_restarts, within)`: replace the actor by a fresh instance built by its own
  factory and keep serving its mailbox; the failing message is dropped (an `ask` on it gets
  `AskFailed`). More than `max_restarts` failures within `within` seconds escalate instead.
- `Stop()`: stop the actor; messages still in its mailbox are rejected (asks get `ActorStopped`).
- `Escalate()`: stop the actor and raise the failure in its parent as `ChildFailed`, handled by
  the parent's own policy; escalating from a top-level actor fails the whole system with
  `EscalationError`.
"""

from __future__ import annotations

from collections import deque

import msgspec


class Restart(msgspec.Struct, frozen=True, tag="restart"):
    """Restart with fresh state, at most `max_restarts` times within `within` seconds."""

    max_restarts: int = 3
    within: float = 60.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(f"Restart.max_restarts must be >= 0, got {self.max_restarts}")
        if not self.within > 0:
            raise ValueError(f"Restart.within must be > 0 seconds, got {self.within}")


class Stop(msgspec.Struct, frozen=True, tag="stop"):
    """Stop the failing actor and reject what is left in its mailbox."""


class Escalate(msgspec.Struct, frozen=True, tag="escalate"):
    """Stop the failing actor and hand the failure to its parent."""


SupervisionPolicy = Restart | Stop | Escalate


class RestartWindow:
    """Sliding window of restart times; `allow(now)` records a restart if the budget allows."""

    __slots__ = ("_policy", "_times")

    def __init__(self, policy: Restart) -> None:
        self._policy = policy
        self._times: deque[float] = deque()

    def allow(self, now: float) -> bool:
        horizon = now - self._policy.within
        times = self._times
        while times and times[0] <= horizon:
            times.popleft()
        if len(times) >= self._policy.max_restarts:
            return False
        times.append(now)
        return True

    @property
    def count(self) -> int:
        return len(self._times)
