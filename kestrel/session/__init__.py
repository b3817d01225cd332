"""The session layer: the agent protocol, the bounded authoring loop (sans-IO), execution
profiles, captured turns, the simulate schedule and `run_session` (the synchronous embedding).

Typical embedding::

    from kestrel.data import load_sample
    from kestrel.agents import BaselineAgent
    from kestrel.session import SessionOptions, run_session

    result = run_session(load_sample(), BaselineAgent(), SessionOptions(checkpoints=("11:00",)))
    result.ledger_jsonl()   # canonical ledger bytes
    result.capture_jsonl()  # the replay input

To drive sessions from your own loop, use the sans-IO pieces `run_session` is made of:
`session_days` and the day driver `DayDriver` (see `kestrel.session.day`; `DayRun`, `advance`
and `apply_turn` are its parts).
See docs/session.md.
"""

from kestrel.session.capture import CaptureHeader, CapturedTurn, read_capture, write_capture
from kestrel.session.drive import author_turn
from kestrel.session.loop import AuthoringLoop, Done, Evidence, Kernel, LoopPorts, LoopSettings
from kestrel.session.profiles import Flags, Mode, Policy, Profile, lookup, names, resolve
from kestrel.session.protocol import (
    Agent,
    AgentReply,
    AgentTurn,
    AuthorRequest,
    AuthorStep,
    Invalid,
    PassTurn,
    Reply,
    RequestView,
    StandDownTurn,
    Supersede,
    TurnReply,
    Usage,
    interpret_reply,
)
from kestrel.frame.typed import TypedSnapshot
from kestrel.session.normalize import NormalizedReply, normalize_reply
from kestrel.session.risk import Finding, RiskAssessment, RiskBounds, RiskLevel, assess, classify, dry_run
from kestrel.session.runner import (
    ENGINE_PATHS,
    DayDriver,
    DayResult,
    DayRun,
    SessionDay,
    SessionError,
    SessionOptions,
    SessionResult,
    advance,
    apply_turn,
    evidence_logger,
    run_session,
    session_days,
)

__all__ = [
    "ENGINE_PATHS",
    "Agent",
    "AgentReply",
    "AgentTurn",
    "AuthorRequest",
    "AuthorStep",
    "AuthoringLoop",
    "CaptureHeader",
    "CapturedTurn",
    "DayDriver",
    "DayResult",
    "DayRun",
    "Done",
    "Evidence",
    "Finding",
    "Flags",
    "Invalid",
    "Kernel",
    "LoopPorts",
    "LoopSettings",
    "Mode",
    "NormalizedReply",
    "PassTurn",
    "Policy",
    "Profile",
    "Reply",
    "RequestView",
    "RiskAssessment",
    "RiskBounds",
    "RiskLevel",
    "SessionOptions",
    "SessionResult",
    "SessionDay",
    "SessionError",
    "StandDownTurn",
    "Supersede",
    "TurnReply",
    "TypedSnapshot",
    "Usage",
    "advance",
    "apply_turn",
    "assess",
    "author_turn",
    "classify",
    "dry_run",
    "evidence_logger",
    "interpret_reply",
    "lookup",
    "names",
    "normalize_reply",
    "read_capture",
    "resolve",
    "run_session",
    "session_days",
    "write_capture",
]
