"""`--agent` specs: which agent a run uses, read and validated before anything runs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kestrel.cli.errors import UsageError


def agent_of(spec: str) -> Any:
    """The agent named by `--agent`; a plan file or capture is read and validated here, so a
    bad one fails the command up front (exit 2) with the error and its place."""
    from kestrel.agents.baseline import BaselineAgent
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent

    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "baseline" and not arg:
        return BaselineAgent()
    if kind in ("fixed", "recorded") and arg:
        try:
            return FixedAgent.from_file(arg) if kind == "fixed" else RecordedAgent.from_file(arg)
        except ValueError as exc:  # PlanFileError, CaptureError
            raise UsageError(str(exc)) from None
    raise UsageError(f"unknown --agent {spec!r}: use baseline, fixed:PLAN.kes or recorded:CAPTURE.jsonl")


def check_agent_fits(agent: Any, data: Any, options: Any, date: dt.date | None, days: int, spec: str) -> None:
    """Fail up front when the agent cannot play this run: a fixed plan the engine would refuse
    (another instrument, ...), or a capture recorded for other sessions or another schedule."""
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.engine.engine import Engine
    from kestrel.session.runner import session_days

    plan = session_days(data, options, date, days)
    sessions = [d.session for d in plan]
    schedule = [o.label for o in plan[0].ordinals]
    source = spec.partition(":")[2]
    if isinstance(agent, FixedAgent):
        try:
            Engine(options.engine, sessions[0], data.symbol, data.tick_size).arm(agent.plan)
        except ValueError as exc:
            raise UsageError(f"{source}: the engine refuses plan {agent.plan.name!r}: {exc}") from None
    if isinstance(agent, RecordedAgent) and agent.header is not None:
        h = agent.header
        want = [(s.date.isoformat(), o) for s in sessions for o in schedule]
        if agent.slots() != want or h.symbol != data.symbol:
            raise UsageError(
                f"{source} holds turns for {h.symbol} on {', '.join(h.dates)} at "
                f"{' '.join(h.schedule)}, but this run is {data.symbol} on "
                f"{', '.join(s.date.isoformat() for s in sessions)} at {' '.join(schedule)}: "
                f"use `kestrel replay {source}` (it reads the session from the capture) or "
                "pass matching --data/--date/--days/--checkpoints"
            )


__all__ = ["agent_of", "check_agent_fits"]
