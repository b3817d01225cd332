"""Ledger hashes of a fixed engine corpus, for comparing the compiled engine with the pure one
(tests/test_engine_native.py runs this as a script, once with KESTREL_PURE=1).

Prints one JSON object: the engine mode, the modules' files, and per case and path the
sha256 of the ledger's JSONL. The cases: every example plan and the bench's all-day, rich
and re-arming workloads on a busy generated day, with and without friction, and seeded
random plans and configs on random days, each on the reference and the fast path."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kestrel.engine import Engine, EngineConfig, native  # noqa: E402
from kestrel.engine import broker as _broker  # noqa: E402
from kestrel.market.ticks import Ticks  # noqa: E402
from kestrel.lang import Plan, parse  # noqa: E402

from bench.engine_throughput import REARMING, make_days  # noqa: E402
from bench.workloads import engine_corpus  # noqa: E402
from engine_cases import random_config, random_day, random_plan_text  # noqa: E402

FRICTION = EngineConfig(maxorders=5000, slippage_ticks=1.0, fee_per_unit=0.005,
                        fee_per_order=1.0, latency_ticks=1, partial_fills=True)
PATHS = ("reference", "auto")  # auto: the fast path where the plan allows it


def _ledger(engine: Engine, ticks: Ticks, path: str) -> str:
    return hashlib.sha256(engine.run(ticks, path=path).to_jsonl()).hexdigest()


def ledgers(random_cases: int) -> dict[str, str]:
    out: dict[str, str] = {}
    corpus = engine_corpus()
    rearming = parse(REARMING)
    assert isinstance(rearming, Plan)
    corpus.append(("rearming", rearming))
    (session, ticks), = make_days(20_000, seed=5, sessions=1)
    for cfg_name, cfg in (("plain", EngineConfig(maxorders=5000)), ("friction", FRICTION)):
        for name, plan in corpus:
            for path in PATHS:
                e = Engine(cfg, session, plan.instrument or "SYN", 0.01)
                e.arm(plan)
                out[f"{name}/{cfg_name}/{path}"] = _ledger(e, ticks, path)
    rng = random.Random(20261201)
    for k in range(random_cases):
        day_session, day = random_day(rng)
        text = random_plan_text(rng)
        cfg = random_config(rng)
        random_plan = parse(text)
        assert isinstance(random_plan, Plan)
        for path in PATHS:
            e = Engine(cfg, day_session, random_plan.instrument or "TEST", 0.01)
            e.arm(random_plan)
            out[f"random{k}/{path}"] = _ledger(e, day, path)
    return out


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    print(json.dumps({"mode": native.MODE, "broker": Path(_broker.__file__ or "").name,
                      "ledgers": ledgers(cases)}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
