"""Execution profiles and modes: how hard the authoring loop tries, and what runs.

A *mode* answers "what runs" (agent kind, model, allowed panes) and comes from the config file
`modes.toml` shipped with this package; a *profile* answers "how hard the loop tries".

Invariants:
- precedence is explicit flag > mode > profile > built-in default, applied fill-only-if-unset,
  EXCEPT the profile's `view_request_cap`, which REPLACES the resolved cap unless the user pinned
  it with a flag; the displaced cap (and any token budget or effort the profile filled) is
  remembered as the escalation target;
- `balanced` is empty: selecting it resolves exactly like no profile (only the name differs);
- `policy(...)` is None when no escalation trigger is armed, so the loop observes nothing;
- escalation restores only displaced values, never invented ones.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import TypeVar

import msgspec

from kestrel.session.risk import RiskLevel

_T = TypeVar("_T")

DEFAULT_VIEW_REQUEST_CAP = 3
DEFAULT_AUTHORING_TOKEN_BUDGET = 8000


class Profile(msgspec.Struct, frozen=True):
    """A named posture. Zero/None fields inherit the run's value."""

    name: str
    view_request_cap: int = 0
    authoring_token_budget: int = 0
    effort: str | None = None
    self_correct: bool = False
    escalate_on_repair_streak: int = 0
    escalate_on_uncertain: int = 0
    escalate_on_self_correct_failure: bool = False
    escalate_on_risk: RiskLevel | None = None

    @property
    def armed(self) -> bool:
        return bool(
            self.escalate_on_repair_streak
            or self.escalate_on_uncertain
            or self.escalate_on_self_correct_failure
            or self.escalate_on_risk is not None
        )

    def policy(
        self,
        *,
        displaced_cap: int | None,
        displaced_token_budget: int | None,
        effort_filled: bool,
    ) -> Policy | None:
        """Project the profile into the loop-facing policy; None when nothing is armed.

        `displaced_cap` / `displaced_token_budget` are what the run would have used without the
        profile (None when the profile displaced nothing, e.g. a pinned cap); `effort_filled`
        says the profile filled the effort, so escalation restores the provider default."""
        if not self.armed:
            return None
        return Policy(
            profile=self.name,
            repair_streak=self.escalate_on_repair_streak,
            uncertain_completions=self.escalate_on_uncertain,
            on_self_correct_failure=self.escalate_on_self_correct_failure,
            risk_threshold=self.escalate_on_risk,
            restore_cap=displaced_cap,
            restore_token_budget=displaced_token_budget,
            restore_default_effort=effort_filled,
        )


class Policy(msgspec.Struct, frozen=True):
    """What the loop observes (armed triggers) and what an escalation restores."""

    profile: str
    repair_streak: int = 0
    uncertain_completions: int = 0
    on_self_correct_failure: bool = False
    risk_threshold: RiskLevel | None = None
    restore_cap: int | None = None
    restore_token_budget: int | None = None
    restore_default_effort: bool = False


BALANCED = Profile(name="balanced")
FAST = Profile(
    name="fast",
    view_request_cap=1,
    authoring_token_budget=4000,
    effort="low",
    escalate_on_repair_streak=2,
    escalate_on_uncertain=2,
    escalate_on_self_correct_failure=True,
    escalate_on_risk=RiskLevel.CRITICAL,
)
THOROUGH = Profile(
    name="thorough",
    view_request_cap=6,
    authoring_token_budget=16000,
    effort="high",
    self_correct=True,
)

_CATALOG: dict[str, Profile] = {p.name: p for p in (BALANCED, FAST, THOROUGH)}


class ProfileError(ValueError):
    """An unknown profile or mode, or a malformed modes file."""


def names() -> tuple[str, ...]:
    """The profile names, sorted."""
    return tuple(sorted(_CATALOG))


def lookup(name: str) -> Profile:
    """The profile called `name`, case-insensitively, ignoring surrounding whitespace."""
    key = name.strip().lower()
    try:
        return _CATALOG[key]
    except KeyError:
        raise ProfileError(
            f"unknown profile {name.strip()!r}: choose one of {', '.join(names())}"
        ) from None


# ------------------------------------------------------------------------------------------
# Modes


class Mode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What runs: the agent, the model and the panes the agent may request."""

    name: str
    agent: str | None = None
    model: str | None = None
    panes: tuple[str, ...] | None = None
    view_request_cap: int | None = None
    authoring_token_budget: int | None = None
    effort: str | None = None


def load_modes(text: str | None = None) -> dict[str, Mode]:
    """Modes from TOML (`[modes.NAME]` tables); the packaged `modes.toml` by default."""
    if text is None:
        text = resources.files("kestrel.session").joinpath("modes.toml").read_text("utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"modes file is not valid TOML: {exc}") from None
    tables = raw.get("modes", {})
    if not isinstance(tables, dict):
        raise ProfileError("modes file: `modes` must be a table of [modes.NAME] tables")
    out: dict[str, Mode] = {}
    for name in sorted(tables):
        try:
            out[name] = msgspec.convert({"name": name, **tables[name]}, Mode)
        except (msgspec.ValidationError, TypeError) as exc:
            raise ProfileError(f"modes file: mode {name!r}: {exc}") from None
    return out


def lookup_mode(name: str, modes: dict[str, Mode] | None = None) -> Mode:
    table = load_modes() if modes is None else modes
    key = name.strip().lower()
    if key not in table:
        raise ProfileError(f"unknown mode {name.strip()!r}: choose one of {', '.join(sorted(table))}")
    return table[key]


# ------------------------------------------------------------------------------------------
# Resolution


class Flags(msgspec.Struct, frozen=True):
    """What the user set explicitly (None = unset)."""

    view_request_cap: int | None = None
    authoring_token_budget: int | None = None
    effort: str | None = None
    self_correct: bool = False
    agent: str | None = None
    model: str | None = None


class Settings(msgspec.Struct, frozen=True):
    """The resolved loop posture and what runs."""

    view_request_cap: int = DEFAULT_VIEW_REQUEST_CAP
    authoring_token_budget: int = DEFAULT_AUTHORING_TOKEN_BUDGET
    effort: str | None = None
    self_correct: bool = False
    agent: str | None = None
    model: str | None = None
    panes: tuple[str, ...] | None = None


class Resolved(msgspec.Struct, frozen=True):
    settings: Settings
    profile: str | None
    policy: Policy | None


def resolve(flags: Flags, mode: Mode | None = None, profile: Profile | None = None) -> Resolved:
    """Apply explicit flag > mode > profile > default (see the module invariants)."""
    m = mode or Mode(name="")
    cap = _first(flags.view_request_cap, m.view_request_cap)
    budget = _first(flags.authoring_token_budget, m.authoring_token_budget)
    effort = _first(flags.effort, m.effort)
    resolved_cap = cap if cap is not None else DEFAULT_VIEW_REQUEST_CAP
    displaced_cap: int | None = None
    displaced_budget: int | None = None
    effort_filled = False
    self_correct = flags.self_correct
    if profile is not None:
        if profile.view_request_cap > 0 and flags.view_request_cap is None:
            if profile.view_request_cap != resolved_cap:
                displaced_cap = resolved_cap
            resolved_cap = profile.view_request_cap
        if profile.authoring_token_budget > 0 and budget is None:
            budget = profile.authoring_token_budget
            displaced_budget = DEFAULT_AUTHORING_TOKEN_BUDGET
        if profile.effort is not None and effort is None:
            effort = profile.effort
            effort_filled = True
        self_correct = self_correct or profile.self_correct
    settings = Settings(
        view_request_cap=resolved_cap,
        authoring_token_budget=budget if budget is not None else DEFAULT_AUTHORING_TOKEN_BUDGET,
        effort=effort,
        self_correct=self_correct,
        agent=_first(flags.agent, m.agent),
        model=_first(flags.model, m.model),
        panes=m.panes,
    )
    policy = (
        profile.policy(
            displaced_cap=displaced_cap,
            displaced_token_budget=displaced_budget,
            effort_filled=effort_filled,
        )
        if profile is not None
        else None
    )
    return Resolved(settings=settings, profile=profile.name if profile else None, policy=policy)


def _first(*values: _T | None) -> _T | None:
    for v in values:
        if v is not None:
            return v
    return None


__all__ = [
    "BALANCED",
    "DEFAULT_AUTHORING_TOKEN_BUDGET",
    "DEFAULT_VIEW_REQUEST_CAP",
    "FAST",
    "THOROUGH",
    "Flags",
    "Mode",
    "Policy",
    "Profile",
    "ProfileError",
    "Resolved",
    "Settings",
    "load_modes",
    "lookup",
    "lookup_mode",
    "names",
    "resolve",
]
