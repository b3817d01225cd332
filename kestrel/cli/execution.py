"""`simulate`'s execution-model and risk flags: friction (latency, slippage, fees) and the
operator's bounds (maxpos, maxloss, session maxloss), resolved flag > mode > default into the
engine's `EngineConfig`, and the one-line description the report and `--json` show.

A plan's RISK clause can only tighten the operator's bounds (the engine takes the minimum).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from kestrel.cli.errors import UsageError
from kestrel.engine.config import EngineConfig

# flag dest -> (mode key, EngineConfig field, unit factor into the field)
_FIELDS: dict[str, tuple[str, str, float]] = {
    "maxpos": ("maxpos", "maxpos", 1),
    "maxloss": ("maxloss", "maxloss", 1),
    "session_maxloss": ("session_maxloss", "session_maxloss", 1),
    "latency": ("latency_ms", "latency_ns", 1_000_000),
    "slippage": ("slippage_ticks", "slippage_ticks", 1),
    "fee_per_unit": ("fee_per_unit", "fee_per_unit", 1),
    "fee_per_order": ("fee_per_order", "fee_per_order", 1),
}


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("execution model and operator risk bounds (a plan's RISK can only tighten them)")
    g.add_argument("--maxpos", type=int, help="largest absolute position, units (default 1000)")
    g.add_argument("--maxloss", type=float, help="loss bound per plan from its arming, money (default 1000)")
    g.add_argument("--session-maxloss", type=float,
                   help="loss bound for the whole session from the open, never reset by a new plan; "
                        "reaching it stands the session down (default: none)")
    g.add_argument("--latency", type=float, metavar="MS",
                   help="order latency in milliseconds: an order is eligible one tick later and "
                        "not before this much time (default 0)")
    g.add_argument("--slippage", type=float, metavar="TICKS",
                   help="adverse slippage on market-style fills, in ticks (default 0)")
    g.add_argument("--fee-per-unit", type=float, help="fee per unit filled (default 0)")
    g.add_argument("--fee-per-order", type=float, help="fee per order, on its first fill (default 0)")
    g.add_argument("--end-of-day", choices=("flatten", "carry"),
                   help="at the close: flatten (default) or carry the position and its protective "
                        "orders into the next session (--days > 1)")


def engine_config(args: argparse.Namespace, mode: Any | None) -> EngineConfig:
    """The engine config: each field from its flag, else the mode's key, else the default.
    A bad value is a usage error naming the flag or mode key."""
    values: dict[str, Any] = {}
    for dest, (key, field, factor) in _FIELDS.items():
        flag = "--" + dest.replace("_", "-")
        v = getattr(args, dest, None)
        where = flag
        if v is None and mode is not None:
            v = getattr(mode, key, None)
            where = f"mode {mode.name!r} key {key}"
        if v is None:
            continue
        if not math.isfinite(v) or (v <= 0 if dest in ("maxpos", "maxloss", "session_maxloss") else v < 0):
            bound = "> 0" if dest in ("maxpos", "maxloss", "session_maxloss") else ">= 0"
            raise UsageError(f"{where} must be a finite number {bound}, got {v:g}")
        values[field] = int(round(v * factor)) if field in ("maxpos", "latency_ns") else v * factor
    eod = getattr(args, "end_of_day", None) or (getattr(mode, "end_of_day", None) if mode else None)
    if eod is not None:
        values["end_of_day"] = eod
    try:
        return EngineConfig(**values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def describe(cfg: EngineConfig) -> dict[str, Any]:
    """The execution model and bounds, for the report and `--json`."""
    frictionless = not (cfg.latency_ns or cfg.latency_ticks or cfg.slippage_ticks
                        or cfg.fee_per_unit or cfg.fee_per_order)
    return {
        "frictionless": frictionless,
        "latency_ms": cfg.latency_ns / 1_000_000,
        "slippage_ticks": cfg.slippage_ticks,
        "fee_per_unit": cfg.fee_per_unit,
        "fee_per_order": cfg.fee_per_order,
        "maxpos": cfg.maxpos,
        "maxloss": cfg.maxloss,
        "session_maxloss": cfg.session_maxloss,
        "end_of_day": cfg.end_of_day,
    }


def describe_line(cfg: EngineConfig) -> str:
    """One line: `Execution: frictionless ...` or the frictions (and `end of day: carry` when
    positions carry over), then the operator's bounds."""
    d = describe(cfg)
    if d["frictionless"]:
        model = "frictionless (no latency, slippage or fees: an optimistic fill model)"
    else:
        model = (f"latency {d['latency_ms']:g} ms, slippage {d['slippage_ticks']:g} ticks, "
                 f"fees {d['fee_per_unit']:g}/unit + {d['fee_per_order']:g}/order")
    session = "none" if d["session_maxloss"] is None else f"{d['session_maxloss']:g}"
    carry = "; end of day: carry (positions and their protective orders go into the next session)" \
        if d["end_of_day"] == "carry" else ""
    return (f"Execution: {model}{carry}. Operator bounds: maxpos {d['maxpos']}, maxloss {d['maxloss']:g} "
            f"per plan, session maxloss {session} (a plan's RISK can only tighten them)")


__all__ = ["add_flags", "describe", "describe_line", "engine_config"]
