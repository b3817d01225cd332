"""`BlindRequests`: what the agent of a blind hosted run is asked, read through the run's `Blind`.

A blind run's briefings and views are blind already (the driver freezes them with the run's one
mapping, and reads every reply over its aliases, mapping it back before it is checked or armed).
What is left is the ask itself: its date and a risk-assessment re-ask's findings, which name the
plan's real symbol and prices. `BlindRequests.read` maps both: over a universe for every agent
of the run (the request an in-process agent is called with, the `RequestEvent` an external agent
reads and answers, and the pending request a status shows are one mapped request); over one
symbol for an external agent (an in-process one is asked as `kestrel simulate` asks it). The
host's status of a blind session names the aliases and the session numbers (`days`) too. The
real date stays on the ask (`AskAgent.date`: resuming keys on it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kestrel.frame.blind import Blind
from kestrel.market.session import SessionSpec
from kestrel.session.portfolio_day import blind_request
from kestrel.session.protocol import AuthorRequest


@dataclass(frozen=True)
class BlindRequests:
    """A blind run's asks as its agent reads them: `days` each run session's date (ISO) as
    the blind label its briefings print (`Blind.day`: `d<k>`, k its session number)."""

    blind: Blind
    days: Mapping[str, str]

    @classmethod
    def of(cls, blind: Blind, sessions: Sequence[SessionSpec]) -> BlindRequests:
        return cls(blind, {s.date.isoformat(): blind.day(s.open_ns) for s in sessions})

    def read(self, request: AuthorRequest, date: str) -> tuple[AuthorRequest, str]:
        """(the request as the agent reads it, its date as the agent reads it): a date of no
        run session (never asked) reads as no date rather than a real one."""
        return blind_request(self.blind, request), self.days.get(date, "")


__all__ = ["BlindRequests"]
