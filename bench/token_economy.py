"""Tokens of each corpus document in Kestrel vs the same content as compact JSON.

Kestrel side: the canonical text (`format(parse(file))`, comments dropped). JSON side, two
rivals, both compact (no spaces):
- "AST JSON" (the headline `token_ratio_median`): the JSON equivalent of the plan, i.e. the
  AST as msgspec encodes it (the schema the runtime and the session protocol use), with null
  fields and default values left out;
- "shaped JSON" (`token_ratio_vs_shaped_json_median`): a hand-minimised JSON of the same
  content with short keys and Kestrel-like micro-syntax inside strings ("-0.6%", "30m",
  "15:45"), i.e. the hardest rival we could write.
Medians are over the plan documents (files holding a PLAN); all documents are also given. Tokens are counted with a production
BPE tokenizer (quicktok's exact o200k_base, and cl100k_base) when `quicktok` is installed
(`pip install quicktok-v1`, the project's `bench` extra); otherwise with a documented proxy
(runs of word characters plus each punctuation character), which the output says.
Prints one JSON line. `--quick` is accepted (the bench is already fast).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kestrel.lang import (  # noqa: E402
    And,
    Arith,
    Call,
    Cancel,
    Compare,
    Crosses,
    Duration,
    Flat,
    For,
    Ident,
    Module,
    Neg,
    Not,
    Number,
    Offset,
    Or,
    Order,
    Pass,
    Percent,
    Plan,
    Series,
    StandDown,
    TimeOfDay,
    Until,
    View,
    format,
    parse,
)
from kestrel.lang.formatter import num, offset, tod  # noqa: E402


def _value(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def jexpr(e: Any) -> Any:
    """An expression as compact JSON: literals as numbers or short strings, operators as
    {"op": .., "l": .., "r": ..}, calls as {"fn": .., "args": [..]}."""
    if isinstance(e, Number):
        return _value(e.value)
    if isinstance(e, Percent):
        return f"{num(e.value)}%"
    if isinstance(e, Duration):
        return f"{e.value}{e.unit}"
    if isinstance(e, TimeOfDay):
        return tod(e)
    if isinstance(e, Series):
        return e.name
    if isinstance(e, Call):
        return {"fn": e.name, "args": [jexpr(a) for a in e.args]}
    if isinstance(e, (Arith, Compare)):
        return {"op": e.op, "l": jexpr(e.left), "r": jexpr(e.right)}
    if isinstance(e, Crosses):
        return {"op": f"crosses_{e.direction}", "l": jexpr(e.left), "r": jexpr(e.right)}
    if isinstance(e, And):
        return {"and": [jexpr(o) for o in e.operands]}
    if isinstance(e, Or):
        return {"or": [jexpr(o) for o in e.operands]}
    if isinstance(e, Not):
        return {"not": jexpr(e.operand)}
    if isinstance(e, Neg):
        return {"neg": jexpr(e.operand)}
    raise TypeError(type(e).__name__)


def jaction(a: Order | Flat | Cancel) -> Any:
    if isinstance(a, Flat):
        return "flat"
    if isinstance(a, Cancel):
        return "cancel"
    out: dict[str, Any] = {"side": a.side, "qty": a.qty, "type": a.order_type}
    if a.price is not None:
        out["price"] = jexpr(a.price)
    for key, off in (("stop", a.stop), ("target", a.target)):
        if off is not None:
            out[key] = offset(off)
    if a.trail is not None:
        out["trail"] = offset(a.trail, signed=False)
    if a.ttl is not None:
        out["ttl"] = jexpr(a.ttl)
    return out


def jstatement(s: Any) -> Any:
    if isinstance(s, Plan):
        out: dict[str, Any] = {"plan": s.name}
        if s.instrument:
            out["on"] = s.instrument
        if isinstance(s.expiry, Until):
            out["until"] = tod(s.expiry.at)
        elif isinstance(s.expiry, For):
            out["for"] = jexpr(s.expiry.span)
        risk = {k: _value(v) for k, v in msgspec.structs.asdict(s.risk).items() if v is not None}
        if risk:
            out["risk"] = risk
        rules = []
        for r in s.rules:
            rule: dict[str, Any] = {"when": jexpr(r.cond), "do": [jaction(a) for a in r.actions]}
            if r.repeat != 1:
                rule["repeat"] = r.repeat
            rules.append(rule)
        out["rules"] = rules
        return out
    if isinstance(s, View):
        panes: list[Any] = []
        for p in s.panes:
            if not p.args:
                panes.append(p.name)
                continue
            args = [a.value.name if isinstance(a.value, Ident) else jexpr(a.value) for a in p.args]
            names = [a.name for a in p.args]
            if any(names):
                panes.append({"pane": p.name, "args": dict(zip([n or str(i) for i, n in enumerate(names)], args))})
            else:
                panes.append({"pane": p.name, "args": args})
        view: dict[str, Any] = {"view": s.name, "panes": panes}
        if s.budget is not None:
            view["budget"] = s.budget
        return view
    if isinstance(s, StandDown):
        return {"standdown": s.reason} if s.reason is not None else {"standdown": True}
    if isinstance(s, Pass):
        return {"pass": True}
    raise TypeError(type(s).__name__)


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        out = {k: _strip(x) for k, x in v.items() if x is not None}
        if out.get("repeat") == 1:
            del out["repeat"]
        if out.get("second") == 0:
            del out["second"]
        return {k: x for k, x in out.items() if x != [] and x != {}}
    if isinstance(v, (list, tuple)):
        return [_strip(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def ast_json(doc: Any) -> str:
    """The AST's own JSON (msgspec), compact, without nulls and defaults."""
    return json.dumps(_strip(msgspec.to_builtins(doc)), separators=(",", ":"), ensure_ascii=False)


def compact_json(doc: Any) -> str:
    data = [jstatement(s) for s in doc.statements] if isinstance(doc, Module) else jstatement(doc)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


_PROXY = re.compile(r"\w+|[^\w\s]")


def counters() -> tuple[str, Callable[[str], int], Callable[[str], int] | None]:
    try:
        import quicktok  # type: ignore[import-untyped]
    except ImportError:
        return (
            "proxy: word runs + punctuation characters (quicktok not installed)",
            lambda s: len(_PROXY.findall(s)),
            None,
        )
    o200k = quicktok.get_encoding("o200k_base")
    cl100k = quicktok.get_encoding("cl100k_base")
    return ("o200k_base (quicktok, exact)", lambda s: len(o200k.encode(s)), lambda s: len(cl100k.encode(s)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="accepted for uniformity")
    args = ap.parse_args()
    name, count, count_cl = counters()
    corpus = sorted((ROOT / "examples").glob("*.kes"))
    rows: list[dict[str, Any]] = []
    for path in corpus:
        doc = parse(path.read_text())
        kes = format(doc)
        stmts = doc.statements if isinstance(doc, Module) else (doc,)
        rows.append(
            {
                "plan": any(isinstance(s, Plan) for s in stmts),
                "kes": count(kes),
                "ast": count(ast_json(doc)),
                "shaped": count(compact_json(doc)),
                "raw": count(msgspec.json.encode(doc).decode()),
                "kes_cl": count_cl(kes) if count_cl else None,
                "ast_cl": count_cl(ast_json(doc)) if count_cl else None,
            }
        )
    plans = [r for r in rows if r["plan"]]

    def med(rs: list[dict[str, Any]], a: str, b: str) -> float:
        return round(float(statistics.median(r[a] / r[b] for r in rs)), 3)

    out: dict[str, Any] = {
        "bench": "token_economy",
        "tokenizer": name,
        "documents": len(rows),
        "plan_documents": len(plans),
        "token_ratio_median": med(plans, "kes", "ast"),
        "token_ratio_max": round(max(r["kes"] / r["ast"] for r in plans), 3),
        "token_ratio_vs_shaped_json_median": med(plans, "kes", "shaped"),
        "token_ratio_vs_msgspec_raw_median": med(plans, "kes", "raw"),
        "token_ratio_all_documents_median": med(rows, "kes", "ast"),
        "kestrel_tokens_median": statistics.median(r["kes"] for r in plans),
        "ast_json_tokens_median": statistics.median(r["ast"] for r in plans),
        "shaped_json_tokens_median": statistics.median(r["shaped"] for r in plans),
        "target_ratio": 0.45,
        # said plainly: the target holds against the plan's JSON, not against the hardest rival
        "meets_target_vs_ast_json": med(plans, "kes", "ast") <= 0.45,
        "meets_target_vs_shaped_json": med(plans, "kes", "shaped") <= 0.45,
        "quick": args.quick,
    }
    if count_cl is not None:
        out["token_ratio_cl100k_median"] = med(plans, "kes_cl", "ast_cl")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
