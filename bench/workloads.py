"""The engine bench's honest workloads (bench/engine_throughput.py), also run by the
differential and pinned-ledger tests: a plan that trades all day, and a rich 8-rule plan;
and the plan corpora the bench and the engine tests share."""

from __future__ import annotations

from pathlib import Path

from kestrel.lang import Module, Plan, parse

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

ALL_DAY = (
    "PLAN allday RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, 50) AND pos <= 0: BUY 100 MKT STOP -0.3% TARGET +0.3% x100\n"
    "WHEN mid CROSSES BELOW sma(mid, 50) AND pos > 0: FLAT x100"
)
RICH = (
    "PLAN rich RISK maxpos 200\n"
    "WHEN mid CROSSES ABOVE sma(mid, 20) AND pos <= 0 AND spread <= 0.03: BUY 100 MKT STOP -0.4% TARGET +0.6% x100\n"
    "WHEN mid CROSSES BELOW sma(mid, 20) AND pos >= 0 AND spread <= 0.03: SELL 100 MKT STOP +0.4% TARGET -0.6% x100\n"
    "WHEN last > high(10m) AND pos == 0: BUY 100 LMT bid STOP -0.5% TARGET +0.5% TTL 5m x100\n"
    "WHEN last < low(10m) AND pos == 0: SELL 100 LMT ask STOP +0.5% TARGET -0.5% TTL 5m x100\n"
    "WHEN ema(mid, 30) CROSSES BELOW sma(mid, 100) AND pos > 0: FLAT x100\n"
    "WHEN ema(mid, 30) CROSSES ABOVE sma(mid, 100) AND pos < 0: FLAT x100\n"
    "WHEN chg(5m) > 0.5% AND pos == 0: SELL 100 MKT TRAIL 0.3% x100\n"
    "WHEN time >= 15:50 AND pos != 0: FLAT; CANCEL"
)


def example_plans() -> list[tuple[str, Plan]]:
    """Every plan of examples/*.kes (a module's plans each), by file.plan name."""
    out: list[tuple[str, Plan]] = []
    for path in sorted(EXAMPLES.glob("*.kes")):
        doc = parse(path.read_text())
        stmts = doc.statements if isinstance(doc, Module) else (doc,)
        out += [(f"{path.stem}.{s.name}", s) for s in stmts if isinstance(s, Plan)]
    return out


def engine_corpus() -> list[tuple[str, Plan]]:
    """Every example plan, then the all-day and rich workloads (as `all_day`, `rich`)."""
    out = example_plans()
    for name, text in (("all_day", ALL_DAY), ("rich", RICH)):
        plan = parse(text)
        assert isinstance(plan, Plan)
        out.append((name, plan))
    return out
