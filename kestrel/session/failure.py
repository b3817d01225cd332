"""Whether a run failed: the session-level outcome the surfaces report (`SessionResult.failure`).

A run fails when its agent cannot work as configured, never because its model answered badly:

- **fatal**: an agent call failed with a fatal error (a refused API key, HTTP 401/403; an
  unknown model or endpoint, HTTP 404; a USD cap on an unpriced model): the first such error
  is the reason;
- **every call failed**: every ordinal of the run ended in a failed call (an unreachable
  provider, a timeout, a retryable error that still failed after its last attempt) and no call
  of the run was answered at all: the last error is the reason.

A stand-down because the model answered badly (an exhausted repair budget, a refused plan) or
because a spending cap refused a call is a legitimate result, not a failure. The rule reads the
run's evidence (`agent-error` records and their `failure` kind, and the records of answered
calls), so it gives the same answer on every backend and for a run read back from its files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from kestrel.session.loop import Evidence

RunFailureKind = Literal["fatal", "every-call-failed"]

ANSWERED_KINDS = frozenset({"reply", "view-request", "repair", "self-correction", "risk-review",
                            "single-shot-refusal", "late-reply"})
"""Evidence kinds that record an answered agent call (a `late-reply` answered after its timeout)."""


class RunFailure(msgspec.Struct, frozen=True):
    """Why a run failed (`kind`, see the module docstring), in one line (`reason`)."""

    kind: RunFailureKind
    reason: str

    def line(self) -> str:
        """`the run failed: ...` with a hint of what to fix."""
        what = ("the agent cannot work as configured" if self.kind == "fatal"
                else "every call of the run failed")
        return f"the run failed ({what}): {self.reason}"


def run_failure(evidence: Sequence[Evidence], ordinals: int) -> RunFailure | None:
    """The failure of a run with `ordinals` authoring ordinals whose evidence is `evidence`, or
    None (see the module docstring)."""
    errors = [e for e in evidence if e.kind == "agent-error"]
    fatal = next((e for e in errors if e.failure == "fatal"), None)
    if fatal is not None:
        return RunFailure("fatal", fatal.error or "fatal agent error")
    if any(e.kind in ANSWERED_KINDS for e in evidence):
        return None
    failed = [e for e in errors if e.failure != "spending-cap"]
    n = len({(e.date, e.ordinal) for e in failed})
    if not failed or n < ordinals:
        return None
    return RunFailure("every-call-failed",
                      f"{failed[-1].error or 'agent failed'} (every call failed, at all {n} ordinal"
                      f"{'s' if n != 1 else ''})")


__all__ = ["ANSWERED_KINDS", "RunFailure", "RunFailureKind", "run_failure"]
