"""The corpus, the registry and the grammar summary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.lang import GRAMMAR_SUMMARY, Module, Plan, format_source, parse
from kestrel.lang.registry import FUNCTIONS, SERIES

from bench.workloads import example_plans

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "examples").glob("*.kes"))


def test_corpus_has_at_least_twenty_plans() -> None:
    plans = 0
    for path in CORPUS:
        doc = parse(path.read_text())
        stmts = doc.statements if isinstance(doc, Module) else (doc,)
        plans += sum(isinstance(s, Plan) for s in stmts)
    assert plans >= 20


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_is_valid_and_canonical(path: Path) -> None:
    text = path.read_text()
    assert format_source(text) == text


def test_kestrel_fmt_check_is_clean_on_the_corpus() -> None:
    assert main(["fmt", "--check", *map(str, CORPUS)]) == 0
    assert main(["check", *map(str, CORPUS)]) == 0


def test_ten_rule_plan_has_ten_rules() -> None:
    plan = parse((ROOT / "examples" / "ten_rules.kes").read_text())
    assert isinstance(plan, Plan) and len(plan.rules) == 10


def test_registry_matches_the_shared_semantics() -> None:
    assert list(SERIES) == "last bid ask mid spread size vol vwap open pos upnl rpnl pnl time".split()
    types = {n: s.type for n, s in SERIES.items()}
    assert types["vol"] == "Qty" and types["pnl"] == "Money" and types["time"] == "TimeOfDay"
    assert sorted(FUNCTIONS) == sorted(documented_functions())  # each defined in docs/language.md
    assert set("high low range chg sma ema atr rsi stdev zscore bbupper bblower macd macdsignal "
               "abs min max".split()) <= set(FUNCTIONS)  # the names models and tests write
    assert FUNCTIONS["chg"].returns == "Pct"
    atr = FUNCTIONS["atr"]
    assert (atr.min_args, atr.max_args) == (1, 2)
    assert atr.params[1].default is not None and (atr.params[1].default.value, atr.params[1].default.unit) == (1, "m")
    assert FUNCTIONS["sma"].typed == "sma(x: PriceSeries, n: Count[, tf: Timeframe]) -> Price"
    assert FUNCTIONS["sma"].signature == "sma(x,n[,tf])->Price"


def documented_functions() -> list[str]:
    """The functions docs/language.md section 4 defines (its table's rows)."""
    text = (ROOT / "docs" / "language.md").read_text()
    section = text.split("## 4. Series and functions", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)\(", section, flags=re.M)


def test_grammar_summary_is_short_and_its_examples_are_valid() -> None:
    words = re.findall(r"\w+|[^\w\s]", GRAMMAR_SUMMARY)
    assert len(words) < 200  # a punctuation-level proxy; bench/token_economy.py counts BPE tokens
    # the summary's plan lines are valid Kestrel once placeholders are filled in
    plan = GRAMMAR_SUMMARY.split("\n")[1] + "\n" + GRAMMAR_SUMMARY.split("\n")[2]
    plan = plan.replace("cond", "last > high(30m)").replace("BUY|SELL", "BUY").replace("MKT|LMT px", "LMT ask")
    assert isinstance(parse(plan), Plan)
    quicktok = pytest.importorskip("quicktok")
    assert len(quicktok.get_encoding("o200k_base").encode(GRAMMAR_SUMMARY)) < 120


def test_every_corpus_plan_arms_on_the_sample_and_most_trade() -> None:
    """A corpus that never fires teaches nothing: every plan must arm on the bundled sample's
    last session (no foreign `ON SYMBOL`, nothing the engine refuses) and most must fill."""
    from kestrel.data import load_sample
    from kestrel.engine import Armed, Engine, EngineConfig, Filled

    md = load_sample()
    session = md.sessions[-1]
    ticks = md.ticks.between(session.open_ns, session.close_ns)
    traded: list[str] = []
    silent: list[str] = []
    for label, plan in example_plans():
        assert plan.instrument in (None, md.symbol), f"{label} is pinned to {plan.instrument}"
        engine = Engine(EngineConfig(), session, md.symbol, md.tick_size)
        assert any(isinstance(e, Armed) for e in engine.arm(plan)), label
        ledger = engine.run(ticks)
        fills = sum(isinstance(e, Filled) for e in ledger.events)
        (traded if fills else silent).append(label)
    assert len(traded) >= 0.8 * (len(traded) + len(silent)), f"never trade: {silent}"
