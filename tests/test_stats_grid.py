"""A sweep's statistics from per-session records: paired comparisons (antisymmetric, identical
agents give p = 1 and no evidence, repeats averaged within a session before pairing, sessions
matched by (data, date)), the verdict lines, the per-cell figures against hand-computed ones and
against a real run's own metrics, determinism for a seed, and the clear errors."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from kestrel.agents.fixed import FixedAgent
from kestrel.data import load_sample
from kestrel.report import from_result, sharpe_sortino
from kestrel.report.stats import (
    CellKey,
    Comparison,
    ReturnMoments,
    SessionRecord,
    StatsError,
    compare,
    grid_stats,
    session_records,
    text_table,
    verdict,
)
from kestrel.report.stats.paired import signed_rank_pvalues
from kestrel.session import SessionOptions, run_session

ORB = (Path(__file__).resolve().parent.parent / "examples" / "orb_breakout.kes").read_text()
DATES = [f"2024-{1 + k // 28:02d}-{1 + k % 28:02d}" for k in range(80)]


def _records(agent: str, pnls: list[list[float]], profile: str = "balanced", data: str = "d",
             currency: str = "USD") -> list[SessionRecord]:
    """A cell's records: `pnls[s]` the session's repeats."""
    return [SessionRecord(agent, profile, data, DATES[s], v, v / 100.0, repeat=r, currency=currency)
            for s, reps in enumerate(pnls) for r, v in enumerate(reps)]


A, B = CellKey("a", "balanced"), CellKey("b", "balanced")
pnl = st.floats(-500, 500, allow_nan=False).map(lambda x: round(x, 2))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(pnl, min_size=1, max_size=3), st.lists(pnl, min_size=1, max_size=3)),
                min_size=2, max_size=40), st.integers(0, 2**31))
def test_swapping_a_pair_negates_its_difference_and_interval_and_keeps_its_p_value(
        sessions: list[tuple[list[float], list[float]]], seed: int) -> None:
    recs = _records("a", [s[0] for s in sessions]) + _records("b", [s[1] for s in sessions])
    ab = compare(recs, A, B, seed=seed)
    ba = compare(recs, B, A, seed=seed)
    assert ab.sessions == ba.sessions == len(sessions)
    assert ab.mean_difference is not None and ba.mean_difference is not None
    assert ab.mean_difference == pytest.approx(-ba.mean_difference, abs=1e-9)
    assert ab.low is not None and ab.high is not None and ba.low is not None and ba.high is not None
    assert (ab.low, ab.high) == pytest.approx((-ba.high, -ba.low), abs=1e-6)
    assert ab.p_value == pytest.approx(ba.p_value, abs=1e-12)
    assert {ab.evidence, ba.evidence} in ({"none"}, {"better", "worse"})
    # the mean of the repeat-averaged differences, by hand
    d = [sum(x) / len(x) - sum(y) / len(y) for x, y in sessions]
    assert ab.mean_difference == pytest.approx(sum(d) / len(d), abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(pnl, min_size=1, max_size=3), min_size=1, max_size=40))
def test_identical_agents_have_p_1_and_no_evidence_of_a_difference(sessions: list[list[float]]) -> None:
    recs = _records("a", sessions) + _records("b", sessions)
    c = compare(recs, A, B)
    assert (c.mean_difference, c.p_value, c.p_holm, c.evidence) == (0.0, 1.0, 1.0, "none")
    if len(sessions) >= 2:
        assert (c.low, c.high) == (0.0, 0.0)
    assert "no evidence of a difference" in c.verdict


def test_repeats_are_averaged_within_a_session_before_pairing() -> None:
    # a's three repeats scatter around b's single value on every session: no difference at all
    base = [float(10 * k - 150) for k in range(40)]
    recs = _records("a", [[v - 3.0, v, v + 3.0] for v in base]) + _records("b", [[v] for v in base])
    c = compare(recs, A, B)
    assert (c.sessions, c.mean_difference, c.p_value, c.evidence) == (40, 0.0, 1.0, "none")
    g = grid_stats(recs, baselines=("b",))
    cell = next(x for x in g.cells if x.cell == A)
    assert (cell.sessions, cell.records, cell.repeats) == (40, 120, 3)
    assert cell.repeat_sd == pytest.approx(3.0)  # sqrt((9 + 0 + 9) / 2) on each session


def test_a_cell_is_the_mean_of_its_sessions_not_of_its_records() -> None:
    recs = _records("a", [[10.0, 20.0], [0.0], [-4.0]])
    cell = grid_stats(recs).cells[0]
    assert cell.net_pnl.mean == pytest.approx((15.0 + 0.0 - 4.0) / 3)
    assert cell.net_pnl.sd == pytest.approx(math.sqrt(((15 - 11 / 3) ** 2 + (11 / 3) ** 2 + (4 + 11 / 3) ** 2) / 2))
    assert cell.repeat_sd == pytest.approx(math.sqrt(50.0))  # (25 + 25) / 1 degree of freedom
    assert cell.return_on_risk.mean == pytest.approx(0.11 / 3 * 1.0, abs=1e-9)


def test_only_sessions_both_ran_are_paired_and_the_rest_counted() -> None:
    rng = np.random.default_rng(4)
    recs = _records("a", [[float(x)] for x in rng.normal(30, 5, 40)]) + \
        _records("b", [[float(x)] for x in rng.normal(0, 5, 30)])
    recs += [SessionRecord("b", "balanced", "other-data", DATES[0], 1e6, 1.0)]  # another file's session: unpaired
    c = compare(recs, A, B)
    assert (c.sessions, c.unpaired) == (30, 11)
    assert c.evidence == "better" and c.low is not None and c.low > 0
    assert c.verdict.startswith("a (balanced) beats b (balanced) by +")
    assert c.verdict.endswith("per session, p < 0.001, 30 paired sessions")


def test_verdict_lines_read_as_the_rule_says() -> None:
    def comp(mean: float, low: float, high: float, p: float, n: int, evidence: str) -> Comparison:
        return Comparison(A, B, "baseline", n, 0, mean, low, high, 1.0, p, p, evidence, "", n < 30)  # type: ignore[arg-type]

    assert verdict(comp(12.3, 3.1, 20.5, 0.01, 40, "better")) == \
        "a (balanced) beats b (balanced) by +12.30 [+3.10, +20.50] per session, p = 0.01, 40 paired sessions"
    assert verdict(comp(-12.3, -20.5, -3.1, 0.0004, 40, "worse")) == \
        "a (balanced) trails b (balanced) by -12.30 [-20.50, -3.10] per session, p < 0.001, 40 paired sessions"
    assert verdict(comp(1.5, -2.0, 5.0, 0.6213, 40, "none")) == \
        "a (balanced) vs b (balanced): no evidence of a difference (+1.50 [-2.00, +5.00] per session, p = 0.62, " \
        "40 paired sessions)"
    assert verdict(comp(12.3, 3.1, 20.5, 0.01, 12, "better")).endswith(
        "12 paired sessions; fewer than 30 paired sessions: the interval means little")
    none = Comparison(A, B, "best", 0, 5, None, None, None, None, None, None, "none", "", True)
    assert verdict(none) == "a (balanced) vs b (balanced): no paired sessions"


def _grid_records(agents: int = 3, sessions: int = 40, seed: int = 1) -> list[SessionRecord]:
    """Agents with growing edges over a shared market, buy-and-hold per profile, flat once; each
    session's 30 per-minute returns add up to its P&L over a risk capital of 1000."""
    rng = np.random.default_rng(seed)
    market = rng.normal(0, 30, sessions)

    def cell(agent: str, profile: str, values: list[float]) -> list[SessionRecord]:
        out = []
        for s, v in enumerate(values):
            noise = rng.normal(0, 0.002, 30)
            r = v / 1000 / 30 + noise - noise.mean()
            out.append(SessionRecord(agent, profile, "d", DATES[s], v, v / 1000, ReturnMoments.of(r)))
        return out

    recs: list[SessionRecord] = []
    for k in range(agents):
        for p in ("balanced", "fast"):
            recs += cell(f"agent{k}", p, [float(round(5 * k + 0.5 * m + rng.normal(0, 10), 2)) for m in market])
    for p in ("balanced", "fast"):
        recs += cell("buy-and-hold", p, [float(round(m, 2)) for m in market])
    recs += cell("flat", "-", [0.0] * sessions)
    return recs


def test_the_grid_compares_each_agent_with_each_baseline_and_the_best_and_adjusts_by_holm() -> None:
    g = grid_stats(_grid_records())
    agents = [c for c in g.cells if not c.baseline]
    best = agents[0].cell
    assert best.agent == "agent2"  # the largest edge
    vs_base = [c for c in g.comparisons if c.against == "baseline"]
    vs_best = [c for c in g.comparisons if c.against == "best"]
    assert len(vs_base) == 6 * 2 and len(vs_best) == 5
    assert all(c.other == best and c.cell != best for c in vs_best)
    # buy-and-hold in the same profile; flat's only cell for every profile
    assert all(c.other.profile == c.cell.profile for c in vs_base if c.other.agent == "buy-and-hold")
    assert all(c.other.profile == "-" for c in vs_base if c.other.agent == "flat")
    # Holm: the smallest raw p-value times the family size, and never below its raw value
    ps = [c.p_value for c in g.comparisons]
    assert all(p is not None for p in ps)
    low = min(g.comparisons, key=lambda c: (c.p_value or 0.0))
    assert low.p_holm == pytest.approx(min(1.0, len(ps) * (low.p_value or 0.0)))
    assert all((c.p_holm or 0) >= (c.p_value or 0) for c in g.comparisons)
    assert g.deflated is not None and g.deflated.trials == 6 and not g.deflated.cell.agent.startswith("buy")
    assert grid_stats(_grid_records(), trials=50).deflated.trials == 50  # type: ignore[union-attr]
    assert grid_stats(_grid_records(), trials=2).deflated.trials == 6  # type: ignore[union-attr]


def test_the_same_records_in_any_order_give_the_same_bytes() -> None:
    recs = _grid_records()
    shuffled = [recs[k] for k in np.random.default_rng(0).permutation(len(recs))]
    one = msgspec.json.encode(grid_stats(recs, seed=7))
    assert one == msgspec.json.encode(grid_stats(shuffled, seed=7))
    assert one != msgspec.json.encode(grid_stats(recs, seed=8))
    assert text_table(grid_stats(recs, seed=7)) == text_table(grid_stats(shuffled, seed=7))


def test_adding_an_agent_changes_no_other_cell_s_interval_nor_another_pair_s() -> None:
    recs = _grid_records(agents=2)
    more = recs + [r for r in _grid_records(agents=3) if r.agent == "agent2"]
    g1, g2 = grid_stats(recs), grid_stats(more)
    for c in g1.cells:
        twin = next(x for x in g2.cells if x.cell == c.cell)
        assert (twin.net_pnl, twin.return_on_risk) == (c.net_pnl, c.return_on_risk)
    for p in g1.comparisons:
        if p.against == "baseline":
            same = next(x for x in g2.comparisons if (x.cell, x.other) == (p.cell, p.other))
            assert (same.mean_difference, same.low, same.high, same.p_value) == \
                (p.mean_difference, p.low, p.high, p.p_value)


def test_a_real_run_cut_into_sessions_adds_up_to_the_run_and_its_sharpe() -> None:
    data = load_sample()
    res = run_session(data, FixedAgent(ORB), SessionOptions(), days=4)
    rep = from_result(res, data)
    recs = session_records(rep, profile="balanced")
    assert [r.date for r in recs] == list(res.header.dates)
    assert sum(r.net_pnl for r in recs) == pytest.approx(rep.metrics.net_pnl, abs=1e-6)
    assert sum(r.trades for r in recs) == rep.metrics.trades
    assert sum(r.fees for r in recs) == pytest.approx(rep.metrics.fees, abs=1e-9)
    cell = grid_stats(recs).cells[0]
    assert cell.periods_per_year == rep.metrics.periods_per_year
    assert rep.metrics.sharpe is not None and cell.sharpe == pytest.approx(rep.metrics.sharpe, abs=1e-5)
    assert cell.sortino == pytest.approx(rep.metrics.sortino, abs=1e-5)
    assert cell.win_rate == pytest.approx(rep.metrics.win_rate, abs=1e-6)
    assert all(r.return_on_risk == pytest.approx(r.net_pnl / rep.metrics.risk_capital) for r in recs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-500, 500), min_size=0, max_size=30), min_size=1, max_size=6))
def test_pooled_moments_are_the_moments_of_the_sessions_one_after_another(parts: list[list[int]]) -> None:
    # returns in basis points of the risk capital, so the run metrics' equity route is exact too
    whole = np.array([x for p in parts for x in p], dtype=np.float64) / 10_000
    pooled = ReturnMoments.pooled([ReturnMoments.of(np.array(p, dtype=np.float64) / 10_000) for p in parts])
    direct = ReturnMoments.of(whole)
    assert pooled.count == direct.count
    for f in ("mean", "m2", "m3", "m4", "downside"):
        assert getattr(pooled, f) == pytest.approx(getattr(direct, f), rel=1e-9, abs=1e-15)
    if len({x for p in parts for x in p}) >= 2:  # some variation (a constant series has no Sharpe)
        # the run metrics' own Sharpe and Sortino of the same series, from its equity
        equity = np.cumsum([x for p in parts for x in p]).astype(np.float64)
        sharpe, sortino = sharpe_sortino(equity, 10_000.0, 98_280)
        assert pooled.sharpe(98_280) == pytest.approx(sharpe, rel=1e-9, abs=1e-6)
        mine = pooled.sortino(98_280)
        assert (mine is None) == (sortino is None)  # None: no losing minute
        if sortino is not None:
            assert mine == pytest.approx(sortino, rel=1e-9, abs=1e-6)


def test_bad_records_fail_with_a_line_that_says_what_to_fix() -> None:
    dup = _records("a", [[1.0]]) + _records("a", [[2.0]])
    with pytest.raises(StatsError, match=r"two records of d 2024-01-01 repeat 0.*distinct numbers"):
        grid_stats(dup)
    mixed = _records("a", [[1.0]], data="x", currency="EUR") + \
        [SessionRecord("a", "balanced", "y", DATES[1], 2.0, 0.02, currency="USD")]
    with pytest.raises(StatsError, match=r"a \(balanced\) has sessions in EUR, USD"):
        grid_stats(mixed)
    with pytest.raises(StatsError, match=r"net_pnl is nan"):
        grid_stats([SessionRecord("a", "balanced", "d", DATES[0], float("nan"), 0.0)])
    with pytest.raises(StatsError, match=r"seed must be a non-negative integer"):
        grid_stats(_records("a", [[1.0], [2.0]]), seed=-1)
    with pytest.raises(StatsError, match=r"no records of c \(balanced\)"):
        compare(_records("a", [[1.0]]), A, CellKey("c", "balanced"))


def test_the_text_table_shows_the_grid_s_own_numbers() -> None:
    g = grid_stats(_grid_records())
    lines = text_table(g)
    top = g.cells[0]
    head, first = lines[0], lines[1]
    assert head.split()[:3] == ["#", "agent", "model"] and "net PnL per session, mean [95% CI]" in head
    assert first.split()[:4] == ["1", "agent2", "-", top.cell.profile]
    assert f"{top.net_pnl.mean:+.2f} [{top.net_pnl.low:+.2f}, {top.net_pnl.high:+.2f}] USD" in first
    flat = next(line for line in lines if line.split()[1:2] == ["flat"])
    assert "n/a" in flat and flat.endswith("baseline")
    assert sum(1 for line in lines if line.startswith("  ")) == len(g.comparisons)
    assert any(line.startswith("Deflated Sharpe of the best cell, ") for line in lines)
    few = text_table(grid_stats(_grid_records(sessions=10)))
    assert few[-1].startswith("Warning: 9 cells with fewer than 30 sessions")


def test_batched_signed_rank_p_values_are_scipy_s_for_each_series_alone() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for n in (1, 2, 5, 12, 13, 14, 30, 50, 51, 70):
        for kind in range(4):
            d = rng.normal(0.3, 1.0, n)
            if kind == 1:
                d = np.round(d, 0)  # ties and zeros
            elif kind == 2:
                d[: n // 3] = 0.0
            elif kind == 3:
                d = np.round(d, 2)
            rows.append(d)
    rows.append(np.zeros(20))
    got = signed_rank_pvalues(rows)
    for d, p in zip(rows, got):
        want = 1.0 if not np.any(d != 0) else float(scipy_stats.wilcoxon(d, zero_method="wilcox").pvalue)
        assert p == pytest.approx(want, abs=1e-12), (len(d), d)
