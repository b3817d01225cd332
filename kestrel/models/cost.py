"""Dollar cost of model usage with `genai-prices` (an optional extra, imported lazily).

`Usage.input` includes the cache reads and writes (genai-prices' convention too); thinking is
billed as output. A model the price table does not know, or a missing package, costs None
(unknown), never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kestrel.providers import lookup
from kestrel.session.protocol import Usage


def dollars(provider: str, model: str, usage: Usage) -> float | None:
    """The price in USD of `usage` on `model` of `provider` (a registry name, priced under its
    `prices` id), or None when it cannot be priced."""
    entry = lookup(provider)
    if entry is None or not entry.prices:
        return None
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    try:
        price = calc_price(
            PriceUsage(
                input_tokens=usage.input,
                cache_read_tokens=usage.cache_read,
                cache_write_tokens=usage.cache_write,
                output_tokens=usage.output + usage.thinking,
            ),
            model_ref=model,
            provider_id=entry.prices,
        )
    except (LookupError, ValueError):
        return None
    return float(price.total_price)




def _usage_dict(u: Usage) -> dict[str, int]:
    return {"input": u.input, "output": u.output, "thinking": u.thinking,
            "cache_read": u.cache_read, "cache_write": u.cache_write}


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.input + b.input, a.output + b.output, a.thinking + b.thinking,
                 a.cache_read + b.cache_read, a.cache_write + b.cache_write)


def _usd(x: float | None) -> float | None:
    return None if x is None else round(x, 8)


def _calls_in_time_order(evidence: Sequence[Any]) -> list[Any]:
    """The model-call records in the order the calls were made: a timed-out call's
    `agent-error` is replaced, in place, by its `late-reply` (or `abandoned`) record, which the
    session can only record later (after a later ordinal's calls)."""
    later = {(e.date, e.ordinal, e.iteration): e for e in evidence if e.kind in ("late-reply", "abandoned")}
    out = []
    for e in evidence:
        if e.kind in ("late-reply", "abandoned"):
            continue  # placed where its call failed
        if e.kind == "agent-error":
            out.append(later.get((e.date, e.ordinal, e.iteration), e))
        elif e.latency_ms is not None:
            out.append(e)
    return out


def run_cost(
    agent_id: str, evidence: Sequence[Any], outcomes: Sequence[Any], *, latency: bool = True
) -> dict[str, Any]:
    """Tokens and dollars per call, per ordinal and for the run (the report's and `--json`'s
    `cost`). Calls are the evidence records of model calls in time order (those with a
    latency, and each agent failure: a timed-out call counts once, by its `late-reply`, or as
    `abandoned` with unknown tokens and cost when it had not answered by the end of the run);
    tokens per ordinal are the loop's spend for any agent; dollars are None when the agent is
    not a model or its model is not in the price table. A call answered from the reply cache
    (`cached`) spent nothing: its `usd` is 0 and its price is `usd_saved` (the run's total
    `usd_saved`, with `cached` calls counted). `latency=False` leaves the latencies out
    (`--json` stays identical between runs; they are in the evidence file)."""
    provider = agent_id.partition(":")[0]
    entry = lookup(provider)
    priced = entry is not None and bool(entry.prices)
    calls: list[dict[str, Any]] = []
    per: dict[tuple[str, str], dict[str, Any]] = {}
    for o in outcomes:
        per[(o.date, o.ordinal)] = {"date": o.date, "ordinal": o.ordinal, "calls": 0,
                                    "tokens": o.tokens_spent, "usage": Usage(), "usd": 0.0 if priced else None}
    total = Usage()
    total_usd: float | None = 0.0 if priced else None
    abandoned = cached = 0
    counted: set[tuple[str, str]] = set()
    saved: float | None = 0.0 if priced else None
    for e in _calls_in_time_order(evidence):
        unknown = e.kind == "abandoned"
        abandoned += unknown
        usd = dollars(provider, e.model, e.usage) if priced and not unknown else None
        hit = bool(getattr(e, "cached", False))
        cached += hit
        if hit:  # played back from the reply cache: its price is saved, not spent
            saved = None if usd is None or saved is None else saved + usd
            usd_saved, usd = usd, (0.0 if priced else None)
        else:
            usd_saved = 0.0 if priced else None
        call = {"date": e.date, "ordinal": e.ordinal, "iteration": e.iteration, "kind": e.kind,
                "model": e.model, **_usage_dict(e.usage), "usd": _usd(usd), "cached": hit,
                "usd_saved": _usd(usd_saved)}
        if latency:
            call["latency_ms"] = e.latency_ms
        calls.append(call)
        key = (e.date or "", e.ordinal)
        if key not in per:  # an ordinal no outcome names (a replay's recorded calls): its calls' spend
            counted.add(key)
            per[key] = {"date": e.date, "ordinal": e.ordinal, "calls": 0, "tokens": 0, "usage": Usage(),
                        "usd": 0.0 if priced else None}
        slot = per[key]
        if key in counted:
            slot["tokens"] += e.usage.spend
        slot["calls"] += 1
        slot["usage"] = _add(slot["usage"], e.usage)
        total = _add(total, e.usage)
        if unknown:
            continue  # its tokens and dollars are unknown: counted in `abandoned`, not guessed
        if usd is None or slot["usd"] is None:
            slot["usd"] = None
        else:
            slot["usd"] += usd
        total_usd = None if usd is None or total_usd is None else total_usd + usd
    ordinals = [
        {"date": v["date"], "ordinal": v["ordinal"], "calls": v["calls"], "tokens": v["tokens"],
         **_usage_dict(v["usage"]), "usd": _usd(v["usd"])}
        for v in per.values()
    ]
    return {
        "agent": agent_id,
        "calls": calls,
        "ordinals": ordinals,
        "total": {"calls": len(calls), "tokens": sum(o["tokens"] for o in ordinals),
                  **_usage_dict(total), "usd": _usd(total_usd), "abandoned": abandoned,
                  "cached": cached, "usd_saved": _usd(saved)},
    }


__all__ = ["dollars", "run_cost"]
