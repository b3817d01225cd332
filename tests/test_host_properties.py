"""Differential property: whatever an external agent replies (views, bad views, invalid text,
plans, stand-downs, passes, with any reported usage), a session driven through the session host
gives exactly the ledger, capture, outcomes and evidence of `run_session` with an in-process
scripted agent sending the same replies, under any profile. Both backends."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.service.host import RequestEvent, open_host
from kestrel.agents.scripted import ScriptedAgent
from kestrel.data.sample import load_sample
from kestrel.session import profiles
from kestrel.session.loop import LoopSettings
from kestrel.session.protocol import AgentReply, Usage
from kestrel.session.runner import SessionOptions, SessionResult, run_session
from kestrel.session.spec import RunSpec, resolve_run

REPLIES = [
    "PASS",
    'STANDDOWN "no edge"',
    "VIEW v: quote, bars(5m, 6)",
    "VIEW w: nosuchpane",
    "VIEW c: clock",
    "PLAN",
    "PLAN x\nWHEN last > hihg(30m): BUY 100 MKT STOP -0.5",
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1",
    "PLAN fade RISK maxpos 100 maxloss 300\nWHEN last < low(30m): SELL 100 MKT STOP +0.5 TARGET -1",
    "PLAN naked\nWHEN last > high(15m): BUY 100 MKT",
]

replies = st.lists(
    st.tuples(st.sampled_from(REPLIES), st.integers(0, 3000), st.integers(0, 200)), min_size=1, max_size=14
)


def hosted(spec: RunSpec, script: list[tuple[str, int, int]], backend: str) -> SessionResult:
    async def main() -> SessionResult:
        async with open_host() as host:
            started = await host.start(spec)
            outcome, queue = started.outcome, list(script)
            while isinstance(outcome, RequestEvent):
                text, i, o = queue.pop(0) if queue else ("PASS", 0, 0)
                outcome = await host.submit(started.session_id, text, i, o)
            return await host.result(started.session_id)

    result: SessionResult = anyio.run(main, backend=backend)
    return result


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=replies, profile=st.sampled_from([None, "fast", "thorough", "balanced"]))
def test_hosted_external_agent_equals_run_session(backend: str, script: list[tuple[str, int, int]],
                                                  profile: str | None) -> None:
    spec = RunSpec(checkpoints=("11:00", "13:30"), profile=profile)
    run = resolve_run(spec, load_sample())
    got = hosted(spec, script, backend)
    # the reference: the same replies, in process, through run_session
    entries = [AgentReply(t, Usage(input=i, output=o)) for t, i, o in script]
    agent = ScriptedAgent(entries + [AgentReply("PASS")] * 40, agent_id="external", model="")
    want = run_session(run.data, agent, run.options)
    assert got.ledger_jsonl() == want.ledger_jsonl()
    assert got.capture_jsonl() == want.capture_jsonl()
    assert [d.outcomes for d in got.days] == [d.outcomes for d in want.days]
    assert got.evidence == want.evidence
    # and the posture is the one `kestrel simulate --profile` resolves
    lookup = profiles.lookup(profile) if profile else None
    assert run.options.settings == LoopSettings.of(profiles.resolve(profiles.Flags(), None, lookup).settings)
