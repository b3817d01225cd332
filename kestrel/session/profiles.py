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

import math
import tomllib
from importlib import resources
from typing import Literal, TypeVar

import msgspec

from kestrel.lang.dialects import DIALECTS
from kestrel.providers import agent_kinds
from kestrel.providers import names as provider_names
from kestrel.session.risk import RiskLevel

_T = TypeVar("_T")

DEFAULT_VIEW_REQUEST_CAP = 3
DEFAULT_AUTHORING_TOKEN_BUDGET = 8000

EFFORT_LEVELS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""The one effort vocabulary (flags, modes, profiles), weakest first. A model adapter gates the
resolved level through its capability table (`kestrel/models/capabilities.toml`)."""

AGENT_KINDS: tuple[str, ...] = agent_kinds()
"""The agent kinds a `--agent` spec or a mode may name (`kind` or `kind:ARG`): the built-in
agents and the providers of the registry (`kestrel.providers`)."""

PROVIDERS: tuple[str, ...] = provider_names()

CONSTRAIN_CHOICES: tuple[str, ...] = ("auto", "off", *DIALECTS)
"""`--constrain` and a mode's `constrain`: the reply grammar sent to a model (auto: where the
provider takes one; see kestrel.models.constrain)."""
"""Agent kinds that are model providers (they take a model, a base URL and an API key)."""


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
    """What runs: the agent (or a model `provider`), the model, its base URL and API-key
    variable, the reply grammar sent to it (`constrain`, `reason_first`), the panes the agent
    may request, and optional loop knobs; optionally the
    execution model (latency, slippage, fees) and the operator's risk bounds."""

    name: str
    agent: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    constrain: str | None = None
    reason_first: bool | None = None
    panes: tuple[str, ...] | None = None
    view_request_cap: int | None = None
    authoring_token_budget: int | None = None
    effort: str | None = None
    # the execution model and the operator's risk bounds (`kestrel simulate` flags win)
    maxpos: int | None = None
    maxloss: float | None = None
    session_maxloss: float | None = None
    latency_ms: float | None = None
    slippage_ticks: float | None = None
    fee_per_unit: float | None = None
    fee_per_order: float | None = None
    end_of_day: Literal["flatten", "carry"] | None = None

    @property
    def agent_spec(self) -> str | None:
        """The agent this mode runs: `agent`, else `provider` (its model comes from `model`)."""
        return self.agent if self.agent is not None else self.provider


def builtin_modes_text() -> str:
    return resources.files("kestrel.session").joinpath("modes.toml").read_text("utf-8")


def _mode_tables(text: str, source: str) -> dict[str, dict[str, object]]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source} is not valid TOML: {exc}") from None
    tables = raw.get("modes", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise ProfileError(f"{source}: `modes` must hold [modes.NAME] tables")
    out: dict[str, dict[str, object]] = {}
    for name, table in tables.items():
        key = name.strip().lower()
        if key in out:
            raise ProfileError(
                f"{source}: mode {name!r} is defined twice (mode names are case-insensitive): "
                "keep one table"
            )
        out[key] = dict(table)
    return out


def load_modes(
    text: str | None = None,
    *,
    source: str = "modes file",
    panes: tuple[str, ...] | None = None,
    over: str | None = None,
) -> dict[str, Mode]:
    """Modes from TOML (`[modes.NAME]` tables; names case-insensitive); the packaged
    `modes.toml` by default. With `over` (a user's TOML), its tables are merged key by key over
    `text`'s (a user key replaces the built-in one; a new mode is added). Every mode is
    validated (see `validate_mode`); `panes` are the known pane names (None: not checked)."""
    tables = _mode_tables(builtin_modes_text() if text is None else text, "built-in modes.toml"
                          if text is None else source)
    if over is not None:
        for name, table in _mode_tables(over, source).items():
            tables[name] = {**tables.get(name, {}), **table}
    out: dict[str, Mode] = {}
    for name in sorted(tables):
        try:
            mode = msgspec.convert({**tables[name], "name": name}, Mode)
        except (msgspec.ValidationError, TypeError) as exc:
            raise ProfileError(
                f"{source}: mode {name!r}: {exc} (see kestrel/session/modes.toml for the keys)"
            ) from None
        validate_mode(mode, source=source, panes=panes)
        out[name] = mode
    return out


def validate_mode(mode: Mode, *, source: str = "modes file", panes: tuple[str, ...] | None = None) -> None:
    """Reject a mode that could not run, naming the mode, the key and the fix (one line)."""

    def bad(key: str, why: str) -> ProfileError:
        return ProfileError(f"{source}: mode {mode.name!r}: {key} {why}")

    for key, value in (
        ("view_request_cap", mode.view_request_cap),
        ("authoring_token_budget", mode.authoring_token_budget),
    ):
        if value is not None and value < 1:
            raise bad(key, f"must be >= 1, got {value}: set a whole number >= 1 or remove the key")
    bounds: tuple[tuple[str, float | None, int | None], ...] = (
        ("maxpos", mode.maxpos, 1), ("maxloss", mode.maxloss, 0), ("session_maxloss", mode.session_maxloss, 0),
        ("latency_ms", mode.latency_ms, None), ("slippage_ticks", mode.slippage_ticks, None),
        ("fee_per_unit", mode.fee_per_unit, None), ("fee_per_order", mode.fee_per_order, None),
    )
    for key, amount, floor in bounds:
        if amount is None:
            continue
        if not (math.isfinite(amount) and (amount >= 0 if floor is None else amount > 0)):
            need = "a finite number >= 0" if floor is None else "a finite number > 0"
            raise bad(key, f"must be {need}, got {amount:g}: fix the value or remove the key")
    if mode.constrain is not None and mode.constrain not in CONSTRAIN_CHOICES:
        raise bad("constrain", f"{mode.constrain!r} is not a choice: use one of {', '.join(CONSTRAIN_CHOICES)}")
    if mode.effort is not None and mode.effort not in EFFORT_LEVELS:
        raise bad("effort", f"{mode.effort!r} is not an effort level: use one of {', '.join(EFFORT_LEVELS)}")
    if mode.agent is not None:
        kind, sep, arg = mode.agent.partition(":")
        if kind.strip().lower() not in AGENT_KINDS:
            raise bad("agent", f"{mode.agent!r} names no known agent: use one of {', '.join(AGENT_KINDS)}")
        if kind.strip().lower() in ("fixed", "recorded", "replies") and not arg.strip():
            raise bad("agent", f"{mode.agent!r} needs a file: write {kind}:PATH")
    if mode.provider is not None and mode.provider.strip().lower() not in PROVIDERS:
        raise bad("provider", f"{mode.provider!r} is not a model provider: use one of {', '.join(PROVIDERS)}")
    if mode.agent is not None and mode.provider is not None:
        raise bad("provider", "and agent are both set: keep one (agent = \"openai:MODEL\" or provider + model)")
    kind, _, spec_model = (mode.agent_spec or "").partition(":")
    if kind.strip().lower() in PROVIDERS and not spec_model.strip() and not (mode.model or "").strip():
        key = "provider" if mode.provider is not None else "agent"
        raise bad("model", f"is missing: a mode with {key} = {mode.agent_spec!r} needs a model: add "
                           f"model = \"MODEL\" (or write agent = \"{kind.strip().lower()}:MODEL\")")
    if mode.panes is not None and not mode.panes:
        raise bad("panes", "is empty: list the panes the agent may request (e.g. panes = [\"quote\", "
                           "\"bars\"]) or remove the key to allow every pane")
    if kind.strip().lower() in PROVIDERS and spec_model.strip() and (mode.model or "").strip() \
            and spec_model.strip() != (mode.model or "").strip():
        raise bad("model", f"{mode.model!r} conflicts with agent = {mode.agent_spec!r}, which names model "
                           f"{spec_model.strip()!r}: keep one (agent = \"{kind.strip().lower()}:MODEL\" "
                           "or model = \"MODEL\")")
    if panes is not None and mode.panes is not None:
        unknown = [p for p in mode.panes if p not in panes]
        if unknown:
            raise bad("panes", f"names unknown pane {unknown[0]!r}: use panes from {', '.join(panes)}")
    if mode.base_url is not None and not mode.base_url.startswith(("http://", "https://")):
        raise bad("base_url", f"{mode.base_url!r} is not an http(s) URL: write e.g. http://127.0.0.1:8000/v1")


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
    base_url: str | None = None
    api_key_env: str | None = None
    constrain: str | None = None
    reason_first: bool | None = None


class Settings(msgspec.Struct, frozen=True):
    """The resolved loop posture and what runs."""

    view_request_cap: int = DEFAULT_VIEW_REQUEST_CAP
    authoring_token_budget: int = DEFAULT_AUTHORING_TOKEN_BUDGET
    effort: str | None = None
    self_correct: bool = False
    agent: str | None = None
    model: str | None = None
    panes: tuple[str, ...] | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    constrain: str | None = None
    reason_first: bool = False


class Resolved(msgspec.Struct, frozen=True):
    """`note`: a one-line remark for stderr (mode keys dropped because `--agent` names another
    agent kind than the mode's)."""

    settings: Settings
    profile: str | None
    policy: Policy | None
    note: str | None = None


def _kind(spec: str | None) -> str:
    return (spec or "").partition(":")[0].strip().lower()


def _own_mode(flags: Flags, mode: Mode) -> tuple[Mode, str | None]:
    """The mode without its agent-specific keys (model, base_url, api_key_env, constrain,
    reason_first) when `--agent` names another agent kind: they belong to the mode's provider,
    never to the flag's."""
    if flags.agent is None or mode.agent_spec is None or _kind(flags.agent) == _kind(mode.agent_spec):
        return mode, None
    keys = ("model", "base_url", "api_key_env", "constrain", "reason_first")
    dropped = [k for k in keys if getattr(mode, k) is not None]
    if not dropped:
        return mode, None
    note = (f"--agent {flags.agent} is not mode {mode.name!r}'s agent ({mode.agent_spec}): the mode's "
            f"{', '.join(dropped)} are not used")
    return msgspec.structs.replace(mode, **dict.fromkeys(keys)), note


def resolve(flags: Flags, mode: Mode | None = None, profile: Profile | None = None) -> Resolved:
    """Apply explicit flag > mode > profile > default (see the module invariants)."""
    m, note = _own_mode(flags, mode or Mode(name=""))
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
        agent=_first(flags.agent, m.agent_spec),
        model=_first(flags.model, m.model),
        panes=m.panes,
        base_url=_first(flags.base_url, m.base_url),
        api_key_env=_first(flags.api_key_env, m.api_key_env),
        constrain=_first(flags.constrain, m.constrain),
        reason_first=bool(_first(flags.reason_first, m.reason_first)),
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
    return Resolved(settings=settings, profile=profile.name if profile else None, policy=policy, note=note)


def _first(*values: _T | None) -> _T | None:
    for v in values:
        if v is not None:
            return v
    return None


__all__ = [
    "BALANCED",
    "CONSTRAIN_CHOICES",
    "DEFAULT_AUTHORING_TOKEN_BUDGET",
    "DEFAULT_VIEW_REQUEST_CAP",
    "AGENT_KINDS",
    "EFFORT_LEVELS",
    "FAST",
    "PROVIDERS",
    "THOROUGH",
    "Flags",
    "Mode",
    "Policy",
    "Profile",
    "ProfileError",
    "Resolved",
    "Settings",
    "builtin_modes_text",
    "load_modes",
    "validate_mode",
    "lookup",
    "lookup_mode",
    "names",
    "resolve",
]
