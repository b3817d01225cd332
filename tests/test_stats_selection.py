"""Holm's step-down adjustment against worked examples and against the step-down procedure
itself, and the deflated Sharpe ratio against Bailey and Lopez de Prado's (2014) worked numbers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.report.stats import deflated_sharpe, expected_max_sharpe, holm, probabilistic_sharpe


def test_holm_on_the_textbook_example_rejects_the_first_and_fourth_hypotheses() -> None:
    # the Holm-Bonferroni method's standard example (e.g. Wikipedia's): four hypotheses at
    # alpha = 0.05 with p = 0.01, 0.04, 0.03, 0.005. By hand: 0.005 <= 0.05/4 rejects H4,
    # 0.01 <= 0.05/3 rejects H1, 0.03 > 0.05/2 stops: H2 and H3 stand. Adjusted p: 0.005 x 4 =
    # 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, max(0.04 x 1, 0.06) = 0.06.
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [p <= 0.05 for p in adjusted] == [True, False, False, True]


def test_holm_by_hand_with_ties_a_zero_and_the_cap_at_one() -> None:
    # sorted 0.0 x 5 = 0, 0.01 x 4 = 0.04, 0.2 x 3 = 0.6, 0.2 x 2 = 0.4 -> 0.6, 0.5 x 1 -> 0.6
    assert holm([0.2, 0.2, 0.01, 0.5, 0.0]) == pytest.approx([0.6, 0.6, 0.04, 0.6, 0.0])
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([0.3]) == [0.3] and holm([]) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30), st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_adjusted_p_values_reject_exactly_what_the_step_down_procedure_rejects(
        ps: list[float], alpha: float) -> None:
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    rejected: set[int] = set()
    for rank, i in enumerate(order):  # Holm's procedure as he states it
        if ps[i] > alpha / (m - rank):
            break
        rejected.add(i)
    adjusted = holm(ps)
    assert {i for i, p in enumerate(adjusted) if p <= alpha} == rejected
    assert all(p <= q <= 1.0 for p, q in zip(ps, adjusted))


def test_deflated_sharpe_matches_the_paper_s_worked_example() -> None:
    # Bailey and Lopez de Prado (2014), the numerical example: 100 trials, the best with an
    # annualized Sharpe of 2.5 over 5 years of daily returns (T = 1250, 250 a year), the trials'
    # Sharpes varying by 1/2 a year, skewness -3, kurtosis 10: SR0 = 0.1132, DSR = 0.9004.
    sr = 2.5 / math.sqrt(250)
    var = 0.5 / 250
    assert expected_max_sharpe(100, var) == pytest.approx(0.1132, abs=5e-5)
    assert deflated_sharpe(sr, 1250, -3.0, 10.0, trials=100, sharpe_variance=var) == pytest.approx(0.9004, abs=5e-5)


def test_one_trial_is_not_deflated_and_more_trials_deflate_more() -> None:
    sr = 0.05
    assert expected_max_sharpe(1, 0.01) == 0.0
    psr = probabilistic_sharpe(sr, 0.0, 500, 0.0, 3.0)
    # normal returns: Phi(0.05 x sqrt(499) / sqrt(1 + 0.5 x 0.0025)) = Phi(1.11622)
    assert psr == pytest.approx(0.86783, abs=5e-5)
    assert deflated_sharpe(sr, 500, 0.0, 3.0, trials=1, sharpe_variance=0.01) == psr
    values = [deflated_sharpe(sr, 500, 0.0, 3.0, trials=n, sharpe_variance=1e-4) for n in (2, 10, 100, 1000)]
    assert all(v is not None for v in values)
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]
    assert probabilistic_sharpe(sr, 0.0, 1, 0.0, 3.0) is None
