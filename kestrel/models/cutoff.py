"""Leakage: whether a run's market data may be in its model's training data.

The table (`cutoffs.toml`, data with its sources) gives each known model's training-data
cutoff. A run whose first session is on or before its model's cutoff is **in-sample** for the
model (the market it trades may have been read in training: its result says little about
skill); one whose sessions all fall after it is **post-cutoff**; a model no row names has an
**unknown** cutoff. `--require-post-cutoff` refuses every run that is not post-cutoff (unknown
included: fail closed). Generated data (the sample, `sample|seed=N`) cannot have been read in
training: its runs are labelled **generated** and never refused. Agents that are not models
are never labelled.

Invariants: the label depends only on the model name and the run's session dates; the first
matching row wins (specific patterns come first in the table).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import tomllib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

Leakage = Literal["in-sample", "post-cutoff", "unknown", "generated"]


class Cutoff(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One row of the table (field meanings in cutoffs.toml's header)."""

    vendor: str
    patterns: tuple[str, ...]
    cutoff: dt.date
    stated: str
    source: str


class _Table(msgspec.Struct, frozen=True):
    models: tuple[Cutoff, ...]


class LeakageLabel(msgspec.Struct, frozen=True):
    """A run's leakage label: its `kind`, the model, the cutoff (None: unknown) and one line."""

    kind: Leakage
    model: str
    cutoff: dt.date | None
    text: str


@cache
def cutoffs() -> tuple[Cutoff, ...]:
    text = resources.files("kestrel.models").joinpath("cutoffs.toml").read_text("utf-8")
    return msgspec.convert(tomllib.loads(text), _Table).models


def cutoff_of(model: str) -> Cutoff | None:
    """The first row whose pattern matches `model` (lower case, a `vendor/` prefix dropped)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return next((row for row in cutoffs() if any(fnmatch.fnmatchcase(name, p) for p in row.patterns)), None)


def leakage(model: str, dates: Sequence[str | dt.date], *, generated: bool = False) -> LeakageLabel:
    """The label of a run by `model` on sessions `dates` of real data, or of `generated` data
    (see the module docstring)."""
    days = sorted(d if isinstance(d, dt.date) else dt.date.fromisoformat(d) for d in dates)
    row = cutoff_of(model)
    if generated:
        return LeakageLabel("generated", model, None if row is None else row.cutoff,
                            "generated data: no leakage possible")
    if row is None:
        return LeakageLabel("unknown", model, None, f"cutoff unknown for {model}")
    if days and days[0] <= row.cutoff:
        return LeakageLabel("in-sample", model, row.cutoff,
                            f"in-sample for {model} (training cutoff {row.cutoff.isoformat()}, data from "
                            f"{days[0].isoformat()})")
    return LeakageLabel("post-cutoff", model, row.cutoff,
                        f"post-cutoff for {model} (training cutoff {row.cutoff.isoformat()})")


def refused(label: LeakageLabel) -> bool:
    """Whether `--require-post-cutoff` refuses a run with `label`."""
    return label.kind in ("in-sample", "unknown")


def refusal(label: LeakageLabel) -> str:
    """Why `--require-post-cutoff` refuses a run with `label` (one line, with the fix)."""
    if label.kind == "unknown":
        return (f"--require-post-cutoff: the training cutoff of {label.model} is unknown "
                "(kestrel/models/cutoffs.toml has no row for it), so its run cannot be shown to be post-cutoff; "
                "drop the flag or use a model the table knows")
    return (f"--require-post-cutoff: the run is {label.text}: pick sessions after "
            f"{label.cutoff.isoformat() if label.cutoff else '?'} (--date/--days) or another model")


__all__ = ["Cutoff", "Leakage", "LeakageLabel", "cutoff_of", "cutoffs", "leakage", "refusal", "refused"]
