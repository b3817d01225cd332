"""The agent protocol: what an agent is asked, what it answers, and how the runtime reads it.

Invariants:
- an agent returns raw text (`AgentReply`); the runtime, never the agent, turns that text into
  a `Reply` with the language (`interpret_reply`), so every agent gets the same validation;
- `Usage.input` INCLUDES cache reads and writes, `Usage.output` EXCLUDES thinking, and the
  authoring budget spends `input + output + thinking` (adapters normalize to this);
- the terminal `AgentTurn` is the only thing that leaves an authoring loop (to the bus and the
  capture); everything else is evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol, TypeAlias, runtime_checkable

import msgspec

from kestrel.frame.typed import TypedSnapshot, TypedUniverse
from kestrel.market.instrument import Instrument
from kestrel.lang import ast
from kestrel.lang import format_ast
from kestrel.lang.errors import LangError
from kestrel.session.risk import RiskBounds


class Usage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Token usage of one agent call, normalized (see the module invariants)."""

    input: int = 0
    output: int = 0
    thinking: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def spend(self) -> int:
        """What the authoring token budget counts: input + output + thinking."""
        return self.input + self.output + self.thinking


# ------------------------------------------------------------------------------------------
# Terminal turns


class Supersede(msgspec.Struct, frozen=True, tag="supersede", tag_field="kind"):
    """Arm `plan`, replacing the incumbent plan."""

    plan: ast.Plan


class StandDownTurn(msgspec.Struct, frozen=True, tag="stand_down", tag_field="kind"):
    """Disarm entries and cancel working entry orders; protective exits stay live."""

    reason: str


class PassTurn(msgspec.Struct, frozen=True, tag="pass", tag_field="kind"):
    """Keep the incumbent plan as it is."""


AgentTurn: TypeAlias = Supersede | StandDownTurn | PassTurn


class PortfolioTurn(msgspec.Struct, frozen=True):
    """The terminal turn of a universe (a portfolio session): `plans` (each ON its symbol, one
    per symbol, in the reply's order) supersede their symbols' incumbents; `stand_down` symbols
    stand down; `all_down` (a reason) stands every symbol down first. Nothing at all is a PASS."""

    plans: tuple[ast.Plan, ...] = ()
    stand_down: tuple[str, ...] = ()
    all_down: str | None = None


# ------------------------------------------------------------------------------------------
# Replies (what one agent answer means)


class TurnReply(msgspec.Struct, frozen=True, tag="turn", tag_field="kind"):
    """A terminal reply: it ends the authoring loop."""

    turn: AgentTurn


class ModuleReply(msgspec.Struct, frozen=True, tag="module", tag_field="kind"):
    """A terminal reply over a universe (a module of plans, STANDDOWN [ON SYM], PASS): it ends
    the authoring loop with `turn`."""

    turn: PortfolioTurn


class RequestView(msgspec.Struct, frozen=True, tag="request_view", tag_field="kind"):
    """A syntactically valid VIEW document; the loop resolves it against the catalog."""

    view_text: str
    reason: str
    view: ast.View


class Invalid(msgspec.Struct, frozen=True, tag="invalid", tag_field="kind"):
    """The reply could not be parsed or checked; `error` is the repair-guiding text."""

    error: str


Reply: TypeAlias = TurnReply | ModuleReply | RequestView | Invalid


class AuthorStep(msgspec.Struct, frozen=True):
    """One interpreted agent answer. `uncertain` marks a completion the adapter could not vouch
    for (e.g. a reply truncated at the output limit); `cached` one played back from a reply
    cache (no model call was made: its usage is the recorded call's)."""

    reply: Reply
    usage: Usage = Usage()
    latency_ms: float | None = None
    uncertain: bool = False
    cached: bool = False


class AgentReply(msgspec.Struct, frozen=True):
    """What an agent returns: its raw text plus usage, before the runtime interprets it.
    `latency_ms` is set by agents that call a model (the loop then records every call, the
    terminal one too, in the evidence); `note` is a one-line remark for the evidence (e.g. an
    effort level the model does not support, degraded); `cached` marks a reply played back
    from a reply cache (no call was made, nothing was spent).

    What a model adapter also says about the call: `output_limit`, the output tokens the
    reply could bill (so a reply cut at it is told by how much); `reasoning`, the provider's
    separate reasoning field (`reasoning_content`, ...), set aside and never parsed; `refusal`,
    the model's refusal (the provider said it declined: OpenAI's `refusal`, Anthropic's
    `stop_reason: refusal`), which stands the ordinal down with its text as the reason."""

    text: str
    usage: Usage = Usage()
    latency_ms: float | None = None
    uncertain: bool = False
    note: str | None = None
    cached: bool = False
    output_limit: int | None = None
    reasoning: str | None = None
    refusal: str | None = None


class AuthorRequest(msgspec.Struct, frozen=True):
    """What the runtime asks the agent: the briefing (kernel panes + the current view), the
    repair error to fix if any, the posture knobs the agent may honour, and the instrument
    traded (tick size, contract multiplier, currency, minimum lot: what sizing needs).

    `snapshot` is the briefing's facts typed (`kestrel.frame.TypedSnapshot`: clock, quote,
    bars, account, instrument, the operator's bounds and friction, the broker's notices since
    the last turn, the incumbent plan), built from the same frozen snapshot as the text, so
    an agent written in code reads numbers instead of parsing them (None outside a session)."""

    ordinal: str
    iteration: int
    briefing: str
    repair_error: str | None = None
    view_name: str | None = None
    effort: str | None = None
    instrument: Instrument | None = None
    # the operator's bounds: the engine enforces min(these, the plan's RISK), so a plan sized
    # past them has its orders rejected (None: not known to the caller)
    limits: RiskBounds | None = None
    snapshot: TypedSnapshot | None = None
    # a universe's facts typed (`kestrel.frame.typed_universe`), in a portfolio session
    universe: TypedUniverse | None = None


@runtime_checkable
class Agent(Protocol):
    """An author. `iterative` False means single-shot: the agent never enters the authoring
    loop (its one reply must be terminal, else the ordinal stands down fail-closed).
    `blocking` True means `author` may block on I/O (a model adapter): the actor shell then
    calls it on a worker thread so its ask timeout can fire; pure agents answer inline."""

    iterative: ClassVar[bool]
    blocking: ClassVar[bool]

    @property
    def agent_id(self) -> str:
        """A stable id recorded in captures (e.g. `baseline`, `fixed:orb`)."""
        ...

    @property
    def model(self) -> str:
        """The model name recorded in evidence ("" for rule-based agents)."""
        ...

    def author(self, request: AuthorRequest) -> AgentReply:
        """Answer one request; may raise (the loop then stands down fail-closed)."""
        ...


# ------------------------------------------------------------------------------------------
# Interpretation


ParseFn: TypeAlias = Callable[[str], object]
CheckFn: TypeAlias = Callable[[ast.Plan], object]
LANGUAGE_ERRORS: tuple[type[Exception], ...] = (LangError,)
"""The language's own errors: their text is repair guidance for the author."""


def interpret_reply(
    text: str,
    *,
    parse: ParseFn,
    check: CheckFn | None = None,
    errors: tuple[type[Exception], ...] = LANGUAGE_ERRORS,
) -> Reply:
    """Turn raw agent text into a `Reply`.

    - one PLAN that parses and checks → `TurnReply(Supersede)`;
    - `STANDDOWN ["reason"]` → `TurnReply(StandDownTurn)`; `PASS` → `TurnReply(PassTurn)`;
    - one VIEW that parses → `RequestView` (resolution against the catalog is the loop's job);
    - anything else (empty text, several statements, a parse or type error) → `Invalid` with the
      language's error text.
    `parse` raises on a syntax error and `check` on a type error, with one of `errors` (the
    language's own, `LangError`, by default), whose text is surfaced verbatim. Any other
    exception is a bug in the runtime and propagates: it is never shown to the agent.
    """
    body = text.strip()
    if not body:
        return Invalid("empty reply: answer with exactly one PLAN, VIEW, STANDDOWN or PASS")
    lead = text[: len(text) - len(text.lstrip())]
    try:
        # leading blank lines kept (layout is insignificant): the line numbers are the reply's own
        node = parse("\n" * lead.count("\n") + body)
    except errors as exc:  # the language's error carries position, caret and hint
        return Invalid(_message(exc))
    if isinstance(node, ast.Module):
        if len(node.statements) != 1:
            return Invalid(
                f"a reply is one statement, got {len(node.statements)}: answer with exactly one "
                "PLAN, VIEW, STANDDOWN or PASS"
            )
        node = node.statements[0]
    if isinstance(node, ast.Plan):
        if check is not None:
            try:
                check(node)
            except errors as exc:
                return Invalid(_message(exc))
        return TurnReply(Supersede(node))
    if isinstance(node, ast.StandDown):
        return TurnReply(StandDownTurn(node.reason or "stand down requested by the agent"))
    if isinstance(node, ast.Pass):
        return TurnReply(PassTurn())
    if isinstance(node, ast.View):
        return RequestView(view_text=body, reason=node.name, view=node)
    return Invalid(f"unexpected reply of kind {type(node).__name__}: answer with one statement")


def restates(plan: ast.Plan, incumbent: ast.Plan | None) -> bool:
    """Whether `plan` restates the incumbent: the same canonical text (the formatter's), so
    superseding would only re-arm what is already armed. A restated plan is kept, with its
    state (spent rules, working orders), never re-armed."""
    return incumbent is not None and format_ast(plan) == format_ast(incumbent)


def _message(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


__all__ = [
    "Agent",
    "AgentReply",
    "AgentTurn",
    "AuthorRequest",
    "AuthorStep",
    "CheckFn",
    "Invalid",
    "LANGUAGE_ERRORS",
    "ModuleReply",
    "ParseFn",
    "PassTurn",
    "PortfolioTurn",
    "Reply",
    "RequestView",
    "StandDownTurn",
    "Supersede",
    "TurnReply",
    "Usage",
    "interpret_reply",
    "restates",
]
