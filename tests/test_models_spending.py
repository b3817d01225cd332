"""Spending caps: a call whose worst case does not fit what is left is refused before any
request (the server's count says so) and the ordinal stands down with "spending cap"; what a
call really cost (the server's usage, priced by hand at the list prices) is what is spent;
the budget's rule holds for all sequences and under threads."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from call_helpers import PLAN, agent, request
from kestrel.data.sample import load_sample
from kestrel.models.adapter import ModelAgent
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.errors import FatalModelError, ModelError, SpendingCapReached
from kestrel.models.spending import Hold, SpendingBudget, SpendingCap, reserve_all
from kestrel.session.runner import SessionOptions, run_session
from model_server import Canned, serve

GPT_4O_INPUT, GPT_4O_OUTPUT = 2.5e-6, 10e-6  # list prices, $ per token


def stand_downs(cap: SpendingCap) -> tuple[list[str], int, int, SpendingBudget]:
    """A two-ordinal session (OPEN, 11:00) under `cap`: the ordinals' outcomes, the requests
    the server got, the tokens it answered, and the budget."""
    budget = SpendingBudget(cap)
    with serve(lambda path, body: Canned(PLAN)) as srv:
        a = agent("openai", srv, CallPolicy(budgets=(budget,)))
        result = run_session(load_sample(), a, SessionOptions(checkpoints=("11:00",)))
        records = srv.recorded()
    return [o.armed for d in result.days for o in d.outcomes], len(records), sum(r.tokens for r in records), budget


def test_a_token_cap_refuses_the_call_that_would_cross_it() -> None:
    """Each call's worst case is ~2.4k input + 2,048 output tokens; it spends ~2.4k. A 5,000
    cap fits the first call's worst case, not the second's after the first's spend."""
    armed, sent, tokens, budget = stand_downs(SpendingCap(max_tokens=5000))
    assert sent == 1
    assert "spending cap" not in armed[0]
    assert "spending cap" in armed[1] and "5,000-token cap" in armed[1] and "fail-closed" in armed[1]
    assert budget.spent_tokens == tokens and budget.held == Hold(0.0, 0) and budget.refused == 1


def test_a_usd_cap_refuses_the_call_that_would_cross_it() -> None:
    armed, sent, _, budget = stand_downs(SpendingCap(max_usd=0.028))
    assert sent == 1 and "spending cap" not in armed[0]
    assert "spending cap" in armed[1] and "$0.0280 cap" in armed[1]
    assert budget.held == Hold(0.0, 0)


def test_what_is_spent_is_the_reported_usage_at_list_prices() -> None:
    budget = SpendingBudget(SpendingCap(max_usd=1.0))
    usage = {"prompt_tokens": 3000, "completion_tokens": 40}
    with serve(lambda path, body: Canned(PLAN, usage=usage)) as srv:
        agent("openai", srv, CallPolicy(budgets=(budget,))).author(request())
    assert budget.spent_usd == pytest.approx(3000 * GPT_4O_INPUT + 40 * GPT_4O_OUTPUT)
    assert budget.spent_tokens == 3040


def test_a_cap_too_small_for_one_call_sends_nothing() -> None:
    budget = SpendingBudget(SpendingCap(max_tokens=100))
    with serve(lambda path, body: Canned(PLAN)) as srv:
        a = agent("openai", srv, CallPolicy(budgets=(budget,)))
        with pytest.raises(SpendingCapReached, match="^spending cap: the call's worst case"):
            a.author(request())
        sent = srv.count()
    assert sent == 0 and a.policy.stats.counts().refused == 1


def test_a_failed_call_releases_its_hold_and_a_timed_out_one_is_charged_its_worst_case() -> None:
    budget = SpendingBudget(SpendingCap(max_tokens=10**6))
    with serve(lambda path, body: Canned(status=400)) as srv:
        with pytest.raises(ModelError, match="HTTP 400"):
            agent("openai", srv, CallPolicy(budgets=(budget,))).author(request())
    assert (budget.spent_tokens, budget.held) == (0, Hold(0.0, 0))
    with serve(lambda path, body: Canned(PLAN, delay=1.0)) as srv:
        a = agent("openai", srv, CallPolicy(budgets=(budget,)), timeout_s=0.3, max_output_tokens=100)
        with pytest.raises(ModelError, match="timed out"):
            a.author(request())
    assert budget.held == Hold(0.0, 0) and budget.spent_tokens > 100  # the input estimate + 100


def test_a_sweeps_budget_is_shared_by_its_runs() -> None:
    """Four runs in threads, each with its own agent and run budget, all answering to one
    sweep budget of 3 calls' worst case: exactly 3 calls are made in all."""
    # a call's worst case: its output limit (100) + the estimate of "S" and "Q" (a few tokens)
    sweep = SpendingBudget(SpendingCap(max_tokens=3 * 100 + 50), name="sweep")
    refused: list[str] = []
    with serve(lambda path, body: Canned("PASS", usage={"prompt_tokens": 1, "completion_tokens": 1},
                                         delay=0.5)) as srv:
        agents = [agent("openai", srv, CallPolicy(budgets=(SpendingBudget(SpendingCap(max_tokens=10**6)), sweep)),
                        system="S", max_output_tokens=100) for _ in range(4)]

        def run(a: ModelAgent, k: int) -> None:
            try:
                a.author(request(f"r{k}", "Q"))
            except SpendingCapReached as exc:
                refused.append(str(exc))

        threads = [threading.Thread(target=run, args=(a, k)) for k, a in enumerate(agents)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent = srv.count()
    # the calls in flight hold their worst case: a fourth cannot start beside three
    assert sent == 3 and len(refused) == 1 and "the sweep's" in refused[0]
    assert sweep.spent_tokens == 3 * 2 and sweep.held == Hold(0.0, 0)


def test_a_usd_cap_on_an_unpriced_model_is_a_configuration_error() -> None:
    with serve(lambda path, body: Canned(PLAN)) as srv:
        with pytest.raises(FatalModelError, match="not in the price table"):
            agent("openai", srv, CallPolicy(budgets=(SpendingBudget(SpendingCap(max_usd=1.0)),)),
                  model="my-local-llama")
        # a token cap works for it
        a = agent("openai", srv, CallPolicy(budgets=(SpendingBudget(SpendingCap(max_tokens=10**5)),)),
                  model="my-local-llama")
        assert a.author(request()).text == PLAN


# ------------------------------------------------------------------------------------------
# The rule, for all sequences


ops = st.lists(st.tuples(st.sampled_from(["reserve", "settle", "release"]), st.integers(0, 400),
                         st.floats(0, 1)), max_size=60)


@given(ops, st.integers(0, 1000))
def test_holds_and_spend_never_pass_the_cap(sequence: list[tuple[str, int, float]], cap: int) -> None:
    budget = SpendingBudget(SpendingCap(max_tokens=cap))
    open_holds: list[Hold] = []
    spent = 0
    for op, n, share in sequence:
        if op == "reserve":
            fits = spent + sum(h.tokens for h in open_holds) + n <= cap
            try:
                open_holds.append(budget.reserve(None, n))
                assert fits
            except SpendingCapReached:
                assert not fits
        elif open_holds:
            hold = open_holds.pop(0)
            if op == "settle":
                used = int(hold.tokens * share)  # a call costs at most its worst case
                budget.settle(hold, None, used)
                spent += used
            else:
                budget.release(hold)
        assert budget.spent_tokens + budget.held.tokens <= cap
        assert budget.spent_tokens == spent


def test_threads_reserving_at_once_never_pass_the_cap() -> None:
    budget = SpendingBudget(SpendingCap(max_usd=1.0, max_tokens=10**9))
    granted: list[Hold] = []
    lock = threading.Lock()

    def grab() -> None:
        for _ in range(500):
            try:
                h = budget.reserve(0.003, 1)
            except SpendingCapReached:
                continue
            with lock:
                granted.append(h)

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 333  # floor(1.0 / 0.003)
    assert budget.held.usd == pytest.approx(333 * 0.003)


def test_a_refusal_on_one_budget_takes_nothing_from_the_others() -> None:
    run, sweep = SpendingBudget(SpendingCap(max_tokens=100)), SpendingBudget(SpendingCap(max_tokens=10), name="sweep")
    with pytest.raises(SpendingCapReached, match="sweep's 10-token cap"):
        reserve_all([run, sweep], None, 50)
    assert run.held == Hold(0.0, 0) and sweep.held == Hold(0.0, 0)


@pytest.mark.parametrize("kwargs", [{"max_usd": -1.0}, {"max_usd": float("inf")}, {"max_tokens": -1}])
def test_bad_caps_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="cap must be"):
        SpendingCap(**kwargs)  # type: ignore[arg-type]
