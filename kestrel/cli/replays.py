"""A capture replayed as it was run: the recorded agent and the session options of `kestrel
replay`, `kestrel report --capture` (without a ledger) and a blind run of a recorded agent.

Invariant: the options are the capture header's (schedule, guard, data label, source, engine),
with its arm latency (each turn armed after the delay it was recorded with) and its blind mode
(the recorded plans, real values, shown to the session in the blind scale and mapped back to the
very plans), so the replay's ledger and capture are the run's byte for byte (the recorded
turns' model calls copied into the replay's capture: a replay calls nothing itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.market import MarketData
    from kestrel.session.capture import CaptureHeader, CapturedTurn
    from kestrel.session.options import SessionOptions
    from kestrel.session.loop import Evidence
    from kestrel.session.protocol import Agent


def replay_session(header: CaptureHeader, turns: Sequence[CapturedTurn], data: MarketData,
                   **extra: Any) -> tuple[RecordedAgent, SessionOptions]:
    """The recorded agent and the options that replay a capture as it was run (`replay`, and
    `report` without a ledger): its schedule, guard, data label, source and engine; under an
    arm latency every turn armed after the delay it was recorded with; a blind capture blind
    again. `extra`: more `SessionOptions` fields (the engine path, the news feed)."""
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.engine.config import EngineConfig
    from kestrel.session.runner import SessionOptions

    agent = RecordedAgent(turns, agent_id=header.agent, header=header)
    lat = None if isinstance(header.arm_latency, msgspec.UnsetType) else header.arm_latency
    delays = None if lat is None else {f"{t.date} {t.ordinal}": t.arm_delay_ns for t in turns
                                       if not isinstance(t.arm_delay_ns, msgspec.UnsetType)}
    options = SessionOptions(checkpoints=header.schedule[1:], guard_s=header.guard_s, data_name=header.data,
                             engine=header.engine or EngineConfig(), source=header.source,
                             arm_latency=lat, arm_delays=delays, blind=header.blind is True, **extra)
    show_blind(agent, data, options)
    return agent, options


def show_blind(agent: Agent, data: MarketData, options: SessionOptions) -> None:
    """In a blind run a recorded agent writes its (real-valued) plans in the blind scale, which
    the session maps back to the very plans recorded (`kestrel.agents.recorded`)."""
    from kestrel.agents.recorded import RecordedAgent

    if options.blind and isinstance(agent, RecordedAgent) and agent.shown is None:
        from kestrel.session.blind import blind_of

        blind, symbol = blind_of(data), data.symbol
        agent.shown = lambda plan: blind.plan_to_blind(plan, symbol)


def calls_evidence(turns: Sequence[CapturedTurn]) -> list[Evidence]:
    """The model calls a capture's turns record (`CapturedTurn.calls`) as evidence records, in
    order: what `kestrel.models.cost` prices, so a replay or report of a model run shows its
    model, tokens and dollars without the run's evidence file (empty: none recorded). A call
    that answered has latency 0 here (the latency is not captured), and one the reply cache
    answered counts as made (the capture does not say; the evidence file does)."""
    from kestrel.session.loop import Evidence

    out: list[Evidence] = []
    for t in turns:
        if isinstance(t.calls, msgspec.UnsetType):
            continue
        for c in t.calls:
            out.append(Evidence(t.ordinal, c.iteration, c.kind, c.model, c.usage,  # type: ignore[arg-type]
                                budget_exhausted=False, latency_ms=None if c.kind == "agent-error" else 0.0,
                                date=t.date))
    return out


def with_recorded_calls(capture: bytes, recorded: Sequence[CapturedTurn]) -> bytes:
    """A replay's capture with each turn's model calls as the recorded run's turn holds them
    (matched by date and ordinal), so a replay's capture is the run's byte for byte."""
    from kestrel.session.capture import decode_capture, encode_capture

    calls = {(t.date, t.ordinal): t.calls for t in recorded}
    if all(isinstance(c, msgspec.UnsetType) for c in calls.values()):
        return capture
    header, turns = decode_capture(capture)
    return encode_capture(header, [msgspec.structs.replace(t, calls=calls.get((t.date, t.ordinal), msgspec.UNSET))
                                   for t in turns])


def _shown(line: str, width: int = 200) -> str:
    """A ledger line as printable text, cut to `width`."""
    return line if len(line) <= width else line[:width] + "…"


def first_difference(expected: bytes, got: bytes) -> str:
    """`line N: expected <...> / replayed <...>` for the first line where two texts differ. An
    expected file that is not UTF-8 text (or holds NUL/control bytes) is named as binary: its
    bytes are never echoed."""
    try:
        text = expected.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or any(not c.isprintable() for c in text.replace("\n", "").replace("\r", "").replace("\t", "")):
        return "the expected ledger is not a text file (binary data): give the ledger file a run wrote"
    a, b = text.splitlines(), got.decode("utf-8", "replace").splitlines()
    for n, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {n}: expected {_shown(x)} / replayed {_shown(y)}"
    n = min(len(a), len(b)) + 1
    if len(a) > len(b):
        return f"line {n}: expected {_shown(a[n - 1])} / replayed (end of ledger)"
    return f"line {n}: expected (end of ledger) / replayed {_shown(b[n - 1])}"


__all__ = ["calls_evidence", "first_difference", "replay_session", "show_blind", "with_recorded_calls"]
