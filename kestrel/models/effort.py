"""Effort gating: the resolved effort (flag, mode or profile) through the per-model capability
table `capabilities.toml` (data, not code branches).

Invariants:
- a level the model supports is sent as is; an unsupported one degrades to the nearest
  supported level of `EFFORT_LEVELS` (ties: the lower), and a model without reasoning omits
  the parameter; both cases carry a one-line note for the evidence;
- no effort (None: the provider default, also what an escalation restores) omits the
  parameter and carries no note;
- the decision is a pure function of (provider, model, level).
"""

from __future__ import annotations

import fnmatch
import tomllib
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

from kestrel.providers import lookup

from kestrel.session.profiles import EFFORT_LEVELS

Param = Literal["reasoning_effort", "thinking_budget", "adaptive", "none"]


class Capability(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One row of the table."""

    provider: str
    patterns: tuple[str, ...]
    param: Param
    levels: tuple[str, ...] = ()
    budgets: dict[str, int] = msgspec.field(default_factory=dict)
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    system_role: Literal["system", "developer", "user"] = "system"

    def __post_init__(self) -> None:
        unknown = [lv for lv in self.levels if lv not in EFFORT_LEVELS]
        if unknown:
            raise ValueError(f"capabilities.toml {self.patterns[0]!r}: unknown level {unknown[0]!r}")
        if self.param in ("thinking_budget", "adaptive"):
            missing = [lv for lv in self.levels if lv != "none" and lv not in self.budgets]
            if missing:
                raise ValueError(f"capabilities.toml {self.patterns[0]!r}: no budget for {missing[0]!r}")


class _Table(msgspec.Struct, frozen=True):
    models: tuple[Capability, ...]


class EffortDecision(msgspec.Struct, frozen=True):
    """What the request carries: `params` (merged into the SDK call), the level applied
    (None = provider default), a note when the requested level was changed or dropped, and
    `thinking_budget`: the tokens Anthropic's `max_tokens` is raised by, so thinking (fixed
    budget or adaptive) does not cut the reply off."""

    requested: str | None
    applied: str | None
    params: dict[str, object]
    note: str | None = None
    thinking_budget: int = 0


@cache
def capabilities() -> tuple[Capability, ...]:
    text = resources.files("kestrel.models").joinpath("capabilities.toml").read_text("utf-8")
    return msgspec.convert(tomllib.loads(text), _Table).models


def capability(provider: str, model: str) -> Capability:
    """The first row of `provider`'s effort family (its `effort` column in the provider
    registry: an OpenAI-compatible service may use OpenAI's rows, or none) whose pattern matches
    `model`; a family without a matching row, or `none`, takes no effort parameter."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    entry = lookup(provider)
    family = entry.effort if entry is not None else provider
    for row in capabilities():
        if row.provider == family and any(fnmatch.fnmatchcase(name, p) for p in row.patterns):
            return row
    return Capability(provider=provider, patterns=("*",), param="none")


def nearest(level: str, supported: tuple[str, ...]) -> str:
    """The supported level closest to `level` in `EFFORT_LEVELS` (ties: the lower)."""
    rank = EFFORT_LEVELS.index(level)
    return min(supported, key=lambda lv: (abs(EFFORT_LEVELS.index(lv) - rank), EFFORT_LEVELS.index(lv)))


def gate(provider: str, model: str, level: str | None) -> EffortDecision:
    """The request parameters for `level` on `model` (see the module invariants)."""
    if level is None:
        return EffortDecision(requested=None, applied=None, params={})
    if level not in EFFORT_LEVELS:
        raise ValueError(f"unknown effort {level!r}: use one of {', '.join(EFFORT_LEVELS)}")
    row = capability(provider, model)
    if row.param == "none" or not row.levels:
        return EffortDecision(
            requested=level, applied=None, params={},
            note=f"effort {level} omitted: model {model} takes no reasoning effort parameter",
        )
    applied = level if level in row.levels else nearest(level, row.levels)
    note = None if applied == level else (
        f"effort {level} not supported by model {model}: degraded to {applied} "
        f"(supported: {', '.join(row.levels)})"
    )
    params: dict[str, object] = {}
    budget = 0
    if row.param == "reasoning_effort":
        params["reasoning_effort"] = applied
    elif row.param == "adaptive":  # budgets: the max_tokens headroom for the thinking
        params["thinking"] = {"type": "adaptive"}
        params["output_config"] = {"effort": applied}
        budget = row.budgets[applied]
    elif applied != "none":  # thinking_budget
        budget = row.budgets[applied]
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return EffortDecision(requested=level, applied=applied, params=params, note=note,
                          thinking_budget=budget)


__all__ = ["Capability", "EffortDecision", "capabilities", "capability", "gate", "nearest"]
