"""`simulate`'s execution-model and risk flags: friction (latency, slippage, fees) and the
operator's bounds (maxpos, maxloss, session maxloss), resolved flag > mode > default into the
engine's `EngineConfig` (its description for the report and `--json` is
`kestrel.report.summary.describe`).

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
    "lot_size": ("lot_size", "lot_size", 1),
}


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("execution model and operator risk bounds (a plan's RISK can only tighten them)")
    g.add_argument("--maxpos", type=float,
                   help="largest absolute position, units, a whole number of lots (default: the lots "
                        "worth 100 x maxloss at the data's first quote, see docs/session.md)")
    g.add_argument("--lot-size", type=float, metavar="LOT",
                   help="every quantity a whole number of LOT units (default: the instrument's; "
                        "0.001 allows fractional shares, 0.0001 BTC)")
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
        positive = ("maxpos", "maxloss", "session_maxloss", "lot_size")
        if not math.isfinite(v) or (v <= 0 if dest in positive else v < 0):
            bound = "> 0" if dest in positive else ">= 0"
            raise UsageError(f"{where} must be a finite number {bound}, got {v:g}")
        if field == "maxpos":
            values[field] = int(v) if float(v).is_integer() else float(v)
        else:
            values[field] = int(round(v * factor)) if field == "latency_ns" else v * factor
    eod = getattr(args, "end_of_day", None) or (getattr(mode, "end_of_day", None) if mode else None)
    if eod is not None:
        values["end_of_day"] = eod
    try:
        return EngineConfig(**values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


__all__ = ["add_flags", "engine_config"]
