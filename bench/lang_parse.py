"""Parse+check speed of Kestrel documents vs msgspec JSON decoding of the same AST.

For every document of the corpus (examples/*.kes) it times `kestrel.lang.parse` (lex, LALR
parse building the AST, type check) and, in the same run, `msgspec.json.decode` of the same
AST as JSON with full type validation (the reference). It also times lark's stock LALR parser
(its own contextual lexer, building a parse tree only, no AST and no checks) on the 10-rule plan
as a second reference. Prints one JSON line. `--quick` takes fewer samples.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kestrel.lang import Module, Pass, Plan, StandDown, View, parse  # noqa: E402
from kestrel.lang.grammar import compile_grammar  # noqa: E402

Document = Module | Plan | View | StandDown | Pass


def timings_us(fn: Callable[[], object], reps: int, rounds: int) -> list[float]:
    """The mean time of `reps` calls, in microseconds, for each of `rounds` rounds."""
    fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps * 1e6)
    return samples


def best_us(fn: Callable[[], object], reps: int, rounds: int) -> float:
    """Median over `rounds` of the mean time of `reps` calls, in microseconds."""
    return statistics.median(timings_us(fn, reps, rounds))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer samples")
    args = ap.parse_args()
    reps, rounds = (20, 3) if args.quick else (200, 7)
    corpus = sorted((ROOT / "examples").glob("*.kes"))
    decoder = msgspec.json.Decoder(Document)
    kes_us, json_us, ratios = [], [], []
    ten: dict[str, float] = {}
    for path in corpus:
        text = path.read_text()
        doc = parse(text)
        blob = msgspec.json.encode(doc)
        assert decoder.decode(blob) == doc
        samples = timings_us(lambda: parse(text), reps, rounds)
        k = statistics.median(samples)
        j = best_us(lambda: decoder.decode(blob), reps * 10, rounds)
        kes_us.append(k)
        json_us.append(j)
        ratios.append(k / j)
        if path.name == "ten_rules.kes":
            stock = compile_grammar()  # lark's own LALR parser and lexer, same options
            ten = {
                "parse_check_us_10_rules": round(k, 1),
                # the fastest round: the least disturbed by other load on the machine
                "parse_check_us_10_rules_best": round(min(samples), 1),
                "msgspec_us_10_rules": round(j, 2),
                "ratio_vs_msgspec_10_rules": round(k / j, 1),
                "lark_stock_tree_us_10_rules": round(best_us(lambda: stock.parse(text), reps, rounds), 1),
                "tokens_10_rules": sum(1 for _ in stock.lex(text)),
            }
            ten["speedup_vs_lark_stock_10_rules"] = round(
                ten["lark_stock_tree_us_10_rules"] / k, 2
            )
    print(
        json.dumps(
            {
                "bench": "lang_parse",
                "documents": len(corpus),
                "parse_check_us_median": round(statistics.median(kes_us), 1),
                "msgspec_us_median": round(statistics.median(json_us), 2),
                "ratio_vs_msgspec_median": round(statistics.median(ratios), 1),
                **ten,
                "target_us_10_rules": 1000,
                "quick": args.quick,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
