"""The host's hooks the daemon uses: a caller-chosen session id (unique) and a paced feed
with a resume point, both giving the ledger of the unpaced run (asyncio and trio)."""

from __future__ import annotations

import pytest

from kestrel.service.actors.feed import Pace
from kestrel.service.host import HostError, open_host
from kestrel.agents.baseline import BaselineAgent
from kestrel.session.runner import SessionOptions, run_session
from kestrel.session.spec import RunSpec

pytestmark = pytest.mark.anyio


async def test_a_named_paced_session_keeps_the_ledger_and_names_are_unique(anyio_backend: str) -> None:
    from kestrel.data import load_sample

    expected = run_session(load_sample(), BaselineAgent(), SessionOptions(checkpoints=("11:00",))).ledger_jsonl()
    async with open_host() as host:
        run = await host.resolve(RunSpec(checkpoints=("11:00",)))
        started = await host.start(run, BaselineAgent(), agent_id="baseline", pace=Pace(50_000.0), session_id="mine")
        assert started.session_id == "mine"
        with pytest.raises(HostError, match="already in use"):
            await host.start(run, BaselineAgent(), session_id="mine")
        outcome = started.outcome
        from kestrel.service.host import RunEnded

        while not isinstance(outcome, RunEnded):
            outcome = await host.next_outcome("mine", outcome.seq)
        assert outcome.state == "done"
        assert (await host.result("mine")).ledger_jsonl() == expected
        assert [s.session_id for s in await host.sessions()] == ["mine"]
