"""The bounded authoring loop, sans-IO (h11-style): replies in, requests or a terminal turn out.

One loop runs per authoring ordinal under ONE dual budget, `view_request_cap` non-terminal
iterations and `authoring_token_budget` tokens (spend = input + output + thinking):

- a terminal reply (PLAN / STANDDOWN / PASS) ends the loop: it is the only thing that leaves it;
- a view request is resolved against the catalog; if valid the agent is re-asked with that view
  materialized under the SAME frozen snapshot; if invalid it becomes a repair carrying the
  resolution error and the view falls back to the default;
- an invalid reply is a repair: the error is surfaced, the last materialized view stays;
- after each non-terminal step `exhausted = iteration + 1 > cap or spent >= budget`; an exhausted
  loop ends in a fail-closed stand-down whose reason names the budget, never a forced plan;
- an agent exception or timeout (`receive_failure`) is a fail-closed stand-down too;
- every non-terminal step, escalation and failure is an `Evidence` record (never replayed).

Every reply is normalized once before it is parsed (`kestrel.session.normalize`: markdown
fences, `<think>` blocks and prose around one statement stripped; a `normalized` record says
what changed); a reply cut at the output limit that does not read is repaired with how much of
the limit it used; a model's refusal stands the ordinal down with its text as the reason.

Every valid plan of an iterative agent is assessed by the ONE risk classification
(`kestrel.session.risk.assess`, the `assess` port): with `self_correct` its findings earn the
agent one correction re-ask; with a profile policy a plan at or over the risk threshold gets
one risk review; under any profile, a plan with an order a bound will reject gets one bound
check (unless a review already reported it). A plan that restates the incumbent (the same
canonical text) is kept, not re-armed (`restated`). With a profile policy the loop also
observes its escalation triggers (repair streak, uncertain completions, a failing
self-correction pass, plan risk at or over a threshold) and escalates at most once, restoring
only the displaced cap, token budget and effort. A single-shot loop (`iterative=False`)
accepts only a terminal first reply.

Over a universe (a portfolio session) the terminal reply is a module (`ModuleReply`: plans each
ON its symbol, STANDDOWN [ON SYM], PASS) and `Done.module` carries it; its plans are assessed
one by one (the `assess` port reads each plan's own symbol) and reviewed as one: the findings
of every plan, each named by its plan and symbol, the level the highest of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import msgspec

from kestrel.frame.typed import TypedSnapshot, TypedUniverse
from kestrel.market.instrument import Instrument
from kestrel.frame.view import ViewError
from kestrel.lang import ast
from kestrel.session.normalize import NormalizedReply, normalize_reply
from kestrel.session.calls import FailureKind
from kestrel.session.profiles import (
    DEFAULT_AUTHORING_TOKEN_BUDGET,
    DEFAULT_VIEW_REQUEST_CAP,
    Policy,
    Settings,
)
from kestrel.session.protocol import (
    AgentReply,
    AgentTurn,
    AuthorRequest,
    AuthorStep,
    Invalid,
    ModuleReply,
    PassTurn,
    PortfolioTurn,
    Reply,
    RequestView,
    StandDownTurn,
    Supersede,
    TurnReply,
    Usage,
    restates,
)
from kestrel.session.risk import RiskAssessment, RiskBounds, module_assessment


TRUNCATED = "uncertain: truncated at the output limit"


def _truncation(step: AuthorStep, reason: str | None) -> str | None:
    """`reason`, saying so when the model's reply was cut at the output limit."""
    if not step.uncertain:
        return reason
    return TRUNCATED if reason is None else f"{reason}; {TRUNCATED}"


MAX_REFUSAL_CHARS = 300
"""A refusal's text in a stand-down reason is cut to this (the evidence keeps it whole)."""


def cut_message(reply: AgentReply, norm: NormalizedReply) -> str:
    """What a repair says of a reply cut at the output limit: the limit, what the reply spent of
    it (thinking and text) and where its text stops."""
    u = reply.usage
    spent = u.output + u.thinking
    limit = f"the output limit of {reply.output_limit} tokens" if reply.output_limit else "the output limit"
    used = f"{spent} output tokens" + (f" ({u.thinking} thinking, {u.output} text)" if u.thinking else "")
    if norm.unclosed_think:
        where = "while still thinking: its <think> block never closed, so no statement arrived"
    else:
        tail = " ".join(norm.text.split())[-60:]
        where = f"and its text stops at `{tail}`" if tail else "before any text arrived"
    return (f"your reply was cut at {limit}: it used {used} {where}. Reply again with one complete, shorter "
            "statement" + (" and less reasoning" if norm.unclosed_think or u.thinking else "") + ".")


EvidenceKind = Literal[
    "reply",  # a model reply (terminal or a view request's answer)
    "normalized",  # the reply was normalized before parsing (fences, <think>, prose stripped)
    "view-request",  # the agent asked for panes
    "repair",  # an invalid reply, re-asked with the error
    "self-correction",  # a valid plan's self-correction re-ask
    "risk-review",  # a valid plan at or over the profile's risk threshold, re-asked
    "bound-check",  # a valid plan with an order a bound will reject, re-asked (every profile)
    "restated",  # a PLAN equal to the incumbent's canonical text: kept, not re-armed
    "refusal",  # the model refused (its text kept): a fail-closed stand-down
    "model-note",  # a note from the model adapter (e.g. an ignored setting)
    "agent-error",  # the agent call failed or timed out
    "single-shot-refusal",  # a single-shot agent's invalid reply (no loop to repair it)
    "escalation",  # the profile policy escalated
    "late-reply",  # an abandoned call answered after its timeout (discarded)
    "abandoned",  # an abandoned call never answered by the end of the run
]
"""Every kind of evidence record; a closed set, so a typo in a producer is a type error."""
RepairKind = Literal["repair", "self-correction", "risk-review", "bound-check"]


class Evidence(msgspec.Struct, frozen=True, omit_defaults=True):
    """One authoring-loop evidence record (above the determinism line; never replayed).
    `date` names the session (set by the session runner; None for a bare loop); `text` is the
    reply as the agent wrote it where it matters (an invalid reply, a refusal, a late reply);
    `risk` the plan's risk level on a review record."""

    ordinal: str
    iteration: int
    kind: EvidenceKind
    model: str
    usage: Usage
    budget_exhausted: bool
    latency_ms: float | None = None
    panes: tuple[str, ...] = ()
    view: str | None = None
    view_budget: int | None = None
    reason: str | None = None
    error: str | None = None
    profile: str | None = None
    date: str | None = None
    text: str | None = None
    cached: bool = False  # a reply played back from a reply cache: no call, nothing spent
    risk: str | None = None
    # an agent-error's kind when it is not an ordinary call failure ("fatal", "spending-cap")
    failure: str | None = None


class Kernel(msgspec.Struct, frozen=True):
    """What the runtime always renders into a briefing itself (the kernel panes' inputs)."""

    ordinal: str
    iteration: int
    iterations_left: int
    tokens_left: int
    iterative: bool = True


class LoopSettings(msgspec.Struct, frozen=True):
    view_request_cap: int = DEFAULT_VIEW_REQUEST_CAP
    authoring_token_budget: int = DEFAULT_AUTHORING_TOKEN_BUDGET
    effort: str | None = None
    self_correct: bool = False

    @classmethod
    def of(cls, settings: Settings) -> LoopSettings:
        """The loop's knobs from a resolved posture (`profiles.resolve(...).settings`)."""
        return cls(
            settings.view_request_cap,
            settings.authoring_token_budget,
            settings.effort,
            settings.self_correct,
        )


class Done(msgspec.Struct, frozen=True):
    """The loop's end: the terminal turn (the only thing for the bus and the capture). A loop
    over a universe that ends in a module has it in `module` (`turn` is then `PassTurn()`); its
    fail-closed stand-downs are a `StandDownTurn` as anywhere."""

    turn: AgentTurn
    iterations: int
    tokens_spent: int
    module: PortfolioTurn | None = None


@dataclass(frozen=True, slots=True)
class LoopPorts:
    """What the loop needs from the language and the frame, injected.

    - `interpret(text)`: the agent's raw text as a `Reply` (see `protocol.interpret_reply`);
    - `resolve_view(view)`: validate a VIEW against the catalog, returning an opaque resolved
      view, or raise one of `view_errors` (the catalog's `ViewError` by default) whose text is
      the repair; any other exception is a runtime bug and propagates out of the loop;
    - `briefing(resolved_or_None, kernel)`: the kernel panes plus the materialized view (None =
      the default view), all rendered from the one frozen snapshot;
    - `assess(plan)`: the plan's risk assessment (`kestrel.session.risk.assess` against the
      snapshot): the one classification the self-check, the risk trigger and the bound check
      all read (None: no review at all);
    - `normalize(text)`: what of the raw text to interpret (`normalize_reply` by default; a
      universe's reply may hold several statements, `kestrel.session.ports.normalize_module`).
    """

    interpret: Callable[[str], Reply]
    resolve_view: Callable[[ast.View], object]
    briefing: Callable[[object | None, Kernel], str]
    assess: Callable[[ast.Plan], RiskAssessment] | None = None
    view_errors: tuple[type[Exception], ...] = (ViewError,)
    normalize: Callable[[str], NormalizedReply] = normalize_reply


Outcome = AuthorRequest | Done


class LoopError(RuntimeError):
    """The caller drove the loop out of order (a programming error, not agent input)."""


class AuthoringLoop:
    """The state machine for one ordinal. Drive it: `next_request()`, then `receive(...)` with
    each agent answer until it returns `Done`; `evidence` holds the records so far."""

    def __init__(
        self,
        *,
        ordinal: str,
        ports: LoopPorts,
        settings: LoopSettings = LoopSettings(),
        policy: Policy | None = None,
        model: str = "",
        profile: str | None = None,
        iterative: bool = True,
        date: str | None = None,
        instrument: Instrument | None = None,
        limits: RiskBounds | None = None,
        incumbent: ast.Plan | None = None,
        snapshot: TypedSnapshot | None = None,
        universe: TypedUniverse | None = None,
    ) -> None:
        self.ordinal = ordinal
        self.date = date
        self.instrument = instrument
        self.limits = limits
        self.incumbent = incumbent
        self.snapshot = snapshot
        self.universe = universe
        self._ports = ports
        self._policy = policy
        self._model = model
        self._profile = profile
        self._iterative = iterative
        self._cap = settings.view_request_cap
        self._budget = settings.authoring_token_budget
        self._effort = settings.effort
        self._self_correct = settings.self_correct
        self._iteration = 0
        self._spent = 0
        self._view: object | None = None
        self._view_name: str | None = None
        self._repair_error: str | None = None
        self._repair_streak = 0
        self._streak_views = 0
        self._uncertain = 0
        self._escalated = False
        self._corrected = False
        self._bounds_reported = False
        self._pending: AuthorRequest | None = None
        self._invalid_text: str | None = None
        self._escalation_record: Evidence | None = None
        self.evidence: list[Evidence] = []
        self.done: Done | None = None

    # -- driving ------------------------------------------------------------------------------

    @property
    def iteration(self) -> int:
        return self._iteration

    @property
    def tokens_spent(self) -> int:
        return self._spent

    @property
    def escalations(self) -> int:
        """Escalations so far: 0 or 1 (a loop escalates at most once)."""
        return int(self._escalated)

    def next_request(self) -> AuthorRequest:
        """What to ask the agent now (stable until the next `receive`)."""
        if self.done is not None:
            raise LoopError("the authoring loop is done; it asks nothing more")
        if self._pending is None:
            kernel = Kernel(
                ordinal=self.ordinal,
                iteration=self._iteration,
                iterations_left=max(self._cap - self._iteration, 0),
                tokens_left=max(self._budget - self._spent, 0),
                iterative=self._iterative,
            )
            self._pending = AuthorRequest(
                ordinal=self.ordinal,
                iteration=self._iteration,
                briefing=self._ports.briefing(self._view, kernel),
                repair_error=self._repair_error,
                view_name=self._view_name,
                effort=self._effort,
                instrument=self.instrument,
                limits=self.limits,
                snapshot=self.snapshot,
                universe=self.universe,
            )
        return self._pending

    def receive_reply(self, reply: AgentReply) -> Outcome:
        """Normalize the agent's raw text, interpret it with the runtime's language, then
        `receive` it. A refusal ends the loop at once: a fail-closed stand-down whose reason
        holds the refusal's text (kept whole in a `refusal` record)."""
        if self.done is not None:
            raise LoopError("the authoring loop is done; it receives nothing more")
        if reply.note is not None:
            self.evidence.append(
                self._record(kind="model-note", usage=Usage(), latency_ms=None, exhausted=False,
                             reason=reply.note)
            )
        if reply.refusal is not None:
            return self._refused(reply)
        norm = self._ports.normalize(reply.text)
        changes = list(norm.changes)
        if reply.reasoning:
            changes.insert(0, f"the provider's separate reasoning field set aside ({len(reply.reasoning)} chars)")
        if changes:
            self.evidence.append(
                self._record(kind="normalized", usage=Usage(), latency_ms=None, exhausted=False,
                             reason="; ".join(changes))
            )
        interpreted = Invalid(norm.error) if norm.error is not None else self._ports.interpret(norm.text)
        if isinstance(interpreted, Invalid):
            self._invalid_text = reply.text
            if reply.uncertain:
                interpreted = Invalid(f"{cut_message(reply, norm)}\n{interpreted.error}")
        step = AuthorStep(
            reply=interpreted,
            usage=reply.usage,
            latency_ms=reply.latency_ms,
            uncertain=reply.uncertain,
            cached=reply.cached,
        )
        return self.receive(step)

    def _refused(self, reply: AgentReply) -> Done:
        self._pending = None
        self._spent += reply.usage.spend
        refusal = reply.refusal or ""
        said = " ".join(refusal.split()) or "(no text)"
        self.evidence.append(
            self._record(kind="refusal", usage=reply.usage, latency_ms=reply.latency_ms, exhausted=False,
                         reason="the model refused", text=refusal, cached=reply.cached)
        )
        shown = said if len(said) <= MAX_REFUSAL_CHARS else said[: MAX_REFUSAL_CHARS - 1] + "…"
        return self._finish(StandDownTurn(f"model refused: {shown} (fail-closed stand-down)"))

    def receive(self, step: AuthorStep) -> Outcome:
        """Feed one interpreted answer; returns the next request or `Done`."""
        if self.done is not None:
            raise LoopError("the authoring loop is done; it receives nothing more")
        self._pending = None
        self._spent += step.usage.spend
        reply = step.reply
        trigger: str | None = None
        if step.uncertain:
            self._uncertain += 1
            if self._policy and self._policy.uncertain_completions and (
                self._uncertain == self._policy.uncertain_completions
            ):
                trigger = f"uncertain completion #{self._uncertain}"
        resolved: object | None = None
        view_error: str | None = None
        if isinstance(reply, RequestView) and self._iterative:
            resolved, view_error = self._resolve(reply.view)
        # a repair: an invalid reply, or a VIEW the catalog cannot resolve (docs/session.md)
        if isinstance(reply, Invalid) or view_error is not None:
            self._repair_streak += 1
            self._streak_views += view_error is not None
            p = self._policy
            if p and p.repair_streak and self._repair_streak == p.repair_streak and trigger is None:
                what = "repairs" if self._streak_views else "invalid replies"
                trigger = f"repair streak ({self._repair_streak} consecutive {what})"
        else:
            self._repair_streak = self._streak_views = 0

        if isinstance(reply, (TurnReply, ModuleReply)):
            out = self._terminal_or_review(step, reply.turn, trigger)
            if isinstance(out, Done) and step.latency_ms is not None:
                # a model call: the terminal reply's usage and latency go to the evidence too
                self.evidence.append(
                    self._record(kind="reply", usage=step.usage, latency_ms=step.latency_ms,
                                 exhausted=False, reason=_truncation(step, None), cached=step.cached)
                )
            return out
        if not self._iterative:
            return self._single_shot_refusal(step, reply)
        if isinstance(reply, RequestView):
            return self._view_request(step, reply, trigger, resolved, view_error)
        return self._repair(step, reply, trigger)

    def _resolve(self, view: ast.View) -> tuple[object | None, str | None]:
        """The resolved view, or the resolver's own error text (the repair guidance). Any
        other exception is a bug and propagates."""
        try:
            return self._ports.resolve_view(view), None
        except self._ports.view_errors as exc:
            return None, str(exc).strip() or type(exc).__name__

    def receive_failure(self, error: str, kind: FailureKind = "error") -> Done:
        """The agent raised or timed out: stand down fail-closed with the error as reason; the
        evidence record carries the failure's `kind` unless it is an ordinary "error"."""
        if self.done is not None:
            raise LoopError("the authoring loop is done; it receives nothing more")
        self._pending = None
        self.evidence.append(
            self._record(
                kind="agent-error", usage=Usage(), latency_ms=None, exhausted=False, error=error,
                failure=None if kind == "error" else kind,
            )
        )
        return self._finish(StandDownTurn(f"agent failed: {error} (fail-closed stand-down)"))

    # -- steps --------------------------------------------------------------------------------

    def _terminal_or_review(self, step: AuthorStep, turn: AgentTurn | PortfolioTurn,
                            trigger: str | None) -> Outcome:
        if isinstance(turn, Supersede) and restates(turn.plan, self.incumbent):
            self.evidence.append(
                self._record(kind="restated", usage=Usage(), latency_ms=None, exhausted=False,
                             reason=f"plan {turn.plan.name} restates the incumbent (the same canonical text): "
                                    "kept with its state (spent rules, working orders), not re-armed")
            )
            return self._end(turn, trigger)
        if not isinstance(turn, (Supersede, PortfolioTurn)) or self._ports.assess is None:
            return self._end(turn, trigger)
        if isinstance(turn, Supersede):
            a = self._ports.assess(turn.plan)
        elif turn.plans:
            a = module_assessment(turn.plans, self._ports.assess)
        else:
            return self._end(turn, trigger)
        if not self._iterative:
            if a.binding:  # reported, though a single-shot agent cannot be asked again
                self.evidence.append(
                    self._record(kind="bound-check", usage=Usage(), latency_ms=None, exhausted=False,
                                 error="bound check: " + "; ".join(f.text for f in a.binding),
                                 reason="a single-shot agent is not asked again: the plan is armed as is",
                                 risk=a.level.name)
                )
            return self._end(turn, trigger)
        level = a.level.name
        p = self._policy
        if self._self_correct and not self._corrected and a.findings:
            self._corrected = True
            self._bounds_reported = self._bounds_reported or bool(a.binding)
            if trigger is None and p and p.on_self_correct_failure:
                trigger = "self-correction pass failed"
            error = (f"self-correction: the plan is classified {level}: " + "; ".join(f.text for f in a.findings)
                     + ". Correct the plan, or reply STANDDOWN or PASS.")
            return self._non_terminal(step, "self-correction", trigger, error=error, valid=turn, risk=level)
        if p is not None and p.risk_threshold is not None and not self._escalated and a.level >= p.risk_threshold:
            self._bounds_reported = self._bounds_reported or bool(a.binding)
            trigger = trigger or f"plan risk {level}"
            error = (f"risk review: the plan is classified {level} ({'; '.join(a.reasons)}). "
                     "Revise it, or reply STANDDOWN or PASS.")
            return self._non_terminal(step, "risk-review", trigger, error=error, valid=turn, risk=level)
        if a.binding and not self._bounds_reported:
            self._bounds_reported = True
            error = ("bound check: " + "; ".join(f.text for f in a.binding) + ". The engine enforces the "
                     "operator's bounds (RULES) and the plan's RISK, whichever is tighter. Revise the plan, "
                     "or reply STANDDOWN or PASS.")
            return self._non_terminal(step, "bound-check", trigger, error=error, valid=turn, risk=level)
        return self._end(turn, trigger)

    def _end(self, turn: AgentTurn | PortfolioTurn, trigger: str | None) -> Done:
        if trigger is not None:
            self._escalate(trigger)
            self._flush_escalation()
        return self._finish(turn)

    def _view_request(
        self,
        step: AuthorStep,
        reply: RequestView,
        trigger: str | None,
        resolved: object | None,
        error: str | None,
    ) -> Outcome:
        exhausted = self._apply_trigger(trigger)
        ok = error is None
        self.evidence.append(
            self._record(
                kind="view-request",
                usage=step.usage,
                latency_ms=step.latency_ms,
                cached=step.cached,
                exhausted=exhausted,
                panes=tuple(p.name for p in reply.view.panes) if ok else (),
                view=reply.view_text,
                view_budget=reply.view.budget if ok else None,
                reason=_truncation(step, reply.reason),
                error=error,
            )
        )
        self._flush_escalation()
        if exhausted:
            return self._finish(StandDownTurn(self._exhausted_reason("a view request")))
        if ok:
            self._view, self._view_name, self._repair_error = resolved, reply.view.name, None
        else:
            self._view, self._view_name, self._repair_error = None, None, error
        self._iteration += 1
        return self.next_request()

    def _repair(self, step: AuthorStep, reply: Invalid, trigger: str | None) -> Outcome:
        text, self._invalid_text = self._invalid_text, None
        return self._non_terminal(step, "repair", trigger, error=reply.error, text=text)

    def _non_terminal(
        self,
        step: AuthorStep,
        kind: RepairKind,
        trigger: str | None,
        *,
        error: str,
        valid: Supersede | PortfolioTurn | None = None,
        text: str | None = None,
        risk: str | None = None,
    ) -> Outcome:
        """A repair-like step: surface `error`, keep the last view, count against the budget.
        A review of a `valid` plan (self-correction, risk review) only re-asks when budget is
        left: a terminal reply ends the loop whatever it cost, so with no budget left the plan
        is armed as is, its findings kept in the evidence (never a budget stand-down)."""
        exhausted = self._apply_trigger(trigger)
        armed_as_is = exhausted and valid is not None
        self.evidence.append(
            self._record(
                kind=kind,
                usage=step.usage,
                latency_ms=step.latency_ms,
                cached=step.cached,
                exhausted=exhausted,
                error=error,
                reason=_truncation(
                    step,
                    f"no budget left for the {kind} re-ask: the plan is armed as is" if armed_as_is else None,
                ),
                text=text,
                risk=risk,
            )
        )
        self._flush_escalation()
        if valid is not None and exhausted:
            return self._finish(valid)
        if exhausted:
            return self._finish(StandDownTurn(self._exhausted_reason(f"a {kind}")))
        self._repair_error = error
        self._iteration += 1
        return self.next_request()

    def _single_shot_refusal(self, step: AuthorStep, reply: RequestView | Invalid) -> Done:
        what = "a view request" if isinstance(reply, RequestView) else "an invalid reply"
        detail = reply.error if isinstance(reply, Invalid) else reply.view_text
        text, self._invalid_text = self._invalid_text, None
        self.evidence.append(
            self._record(
                kind="single-shot-refusal",
                usage=step.usage,
                latency_ms=step.latency_ms,
                cached=step.cached,
                exhausted=True,
                error=detail,
                reason=_truncation(step, None),
                text=text,
            )
        )
        if isinstance(reply, Invalid):  # what is wrong with it, as the repair would have said
            reason = f"single-shot agent sent an invalid reply: {detail} (fail-closed stand-down)"
        else:
            reason = f"single-shot agent sent {what}; only PLAN, STANDDOWN or PASS are accepted (fail-closed stand-down)"
        return self._finish(StandDownTurn(reason))

    # -- budget and escalation ----------------------------------------------------------------

    def _apply_trigger(self, trigger: str | None) -> bool:
        if trigger is not None:
            self._escalate(trigger)
        return self._iteration + 1 > self._cap or self._spent >= self._budget

    def _escalate(self, trigger: str) -> None:
        """Restore the displaced posture, at most once per loop."""
        p = self._policy
        if p is None or self._escalated:
            return
        self._escalated = True
        restored: list[str] = []
        if p.restore_cap is not None:
            self._cap = p.restore_cap
            restored.append(f"view_request_cap {p.restore_cap}")
        if p.restore_token_budget is not None:
            self._budget = p.restore_token_budget
            restored.append(f"authoring_token_budget {p.restore_token_budget}")
        if p.restore_default_effort:
            self._effort = None
            restored.append("effort default")
        reason = f"{trigger}: restored " + (", ".join(restored) if restored else "nothing")
        self._escalation_record = self._record(
            kind="escalation", usage=Usage(), latency_ms=None, exhausted=False, reason=reason
        )

    def _flush_escalation(self) -> None:
        if self._escalation_record is not None:
            self.evidence.append(self._escalation_record)
            self._escalation_record = None

    def _exhausted_reason(self, during: str) -> str:
        if self._iteration + 1 > self._cap:
            bound = f"view_request_cap {self._cap} reached"
        else:
            bound = f"authoring_token_budget {self._budget} spent ({self._spent} tokens)"
        return (
            f"authoring budget exhausted after {during}: {bound} "
            "(bounded authoring loop, fail-closed stand-down)"
        )

    def _record(
        self,
        *,
        kind: EvidenceKind,
        usage: Usage,
        latency_ms: float | None,
        exhausted: bool,
        panes: tuple[str, ...] = (),
        view: str | None = None,
        view_budget: int | None = None,
        reason: str | None = None,
        error: str | None = None,
        cached: bool = False,
        text: str | None = None,
        risk: str | None = None,
        failure: str | None = None,
    ) -> Evidence:
        return Evidence(
            ordinal=self.ordinal,
            iteration=self._iteration,
            kind=kind,
            model=self._model,
            usage=usage,
            budget_exhausted=exhausted,
            latency_ms=latency_ms,
            panes=panes,
            view=view,
            view_budget=view_budget,
            reason=reason,
            error=error,
            profile=self._profile,
            date=self.date,
            cached=cached,
            text=text,
            risk=risk,
            failure=failure,
        )

    def _finish(self, turn: AgentTurn | PortfolioTurn) -> Done:
        if isinstance(turn, PortfolioTurn):
            self.done = Done(turn=PassTurn(), iterations=self._iteration, tokens_spent=self._spent, module=turn)
            return self.done
        if isinstance(turn, StandDownTurn):
            # one line, so the reason survives the capture → replay round trip unchanged
            turn = StandDownTurn(" ".join(turn.reason.split()))
        self.done = Done(turn=turn, iterations=self._iteration, tokens_spent=self._spent)
        return self.done


__all__ = [
    "MAX_REFUSAL_CHARS",
    "AuthoringLoop",
    "Done",
    "Evidence",
    "EvidenceKind",
    "Kernel",
    "LoopError",
    "LoopPorts",
    "LoopSettings",
    "Outcome",
    "cut_message",
]
