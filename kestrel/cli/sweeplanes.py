"""The model agents of a sweep and where their runs execute (the sweep's network lane).

`SweepCalls` builds each model run's agent (`for_run`) with the sweep's call policy, shared
by every run in this process: one SDK client, rate limiter (`--rpm`/`--tpm`, else the agents'
`rpm=`/`tpm=`, else the provider row's `rpm`/`tpm`) and set of call
slots (`concurrency=`, `--max-concurrency PROVIDER=N`) per endpoint, the sweep's spending
budget next to each run's own, the reply cache, and one stop signal. Its `exhausted()` is the
lane's stop (the sweep's cap refused a call: no further run starts), `cancel()` sets the stop
signal (every later call fails at once), `close()` waits for the calls in flight (bounded by
the call budget) and closes the SDK clients, so no thread or socket outlives the sweep.

The lane's runs execute on `--max-concurrency N` workers at once: `direct`, a thread pool
running `run_session`; `asyncio` or `trio`, one event loop in a thread of its own
(`LoopExecutor`, an anyio blocking portal) running each session on the actor shell, many at
once, the runs' bookkeeping (report, files) on the loop's worker threads. Either way a call in
flight waits on its own thread and never blocks another session's engine; the ledgers are
those of `kestrel simulate` on every backend.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from kestrel.cli.errors import UsageError

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from kestrel.cli.callflags import RateFlags
    from kestrel.market import MarketData
    from kestrel.models.adapter import ModelAgent
    from kestrel.models.replycache import ReplyCache
    from kestrel.models.spec import ModelSpec
    from kestrel.models.spending import SpendingBudget
    from kestrel.session.options import EvidenceSink, SessionOptions
    from kestrel.session.protocol import Agent
    from kestrel.session.results import SessionResult
    from kestrel.sweep.spec import SweepRun

BACKENDS = ("direct", "asyncio", "trio")
DEFAULT_CONCURRENCY = 8


class SweepCalls:
    """The sweep's model agents (see the module docstring). `specs` maps each run's agent (a
    spec's identity) to its full spec; `per_provider` is `--max-concurrency PROVIDER=N`."""

    def __init__(self, specs: Mapping[str, ModelSpec], *, timeout_s: float,
                 per_provider: Mapping[str, int] | None = None, sweep: SpendingBudget | None = None,
                 run_max_usd: float | None = None, run_max_tokens: int | None = None,
                 cache: ReplyCache | None = None, rates: RateFlags | None = None) -> None:
        from kestrel.cli.callflags import endpoint_rate
        from kestrel.models.limiter import Limiters, RateLimit
        from kestrel.models.slots import Slots
        from kestrel.providers import lookup

        self.specs = dict(specs)
        self.timeout_s = timeout_s
        self.sweep = sweep
        self.run_caps = (run_max_usd, run_max_tokens)
        self.cache = cache
        self.stop = threading.Event()
        self.slots = Slots()
        self.limiters = Limiters()
        self._endpoints: dict[str, tuple[Any, Any]] = {}  # identity -> (limiter, slots)
        per_provider = dict(per_provider or {})
        limits: dict[str, tuple[float | None, float | None, int | None]] = {}
        for ms in self.specs.values():  # one rate limit and one concurrency per endpoint
            row = lookup(ms.provider)
            url = ms.base_url or (row.default_base_url if row is not None else None)
            key = f"{ms.provider}@{url}"
            rpm, tpm, conc = limits.get(key, (None, None, None))
            for name, mine, theirs in (("rpm", ms.rpm, rpm), ("tpm", ms.tpm, tpm), ("concurrency", ms.concurrency, conc)):
                if mine is not None and theirs is not None and mine != theirs:
                    raise UsageError(f"agents on {url or ms.provider} give two values of {name} "
                                     f"({theirs:g} and {mine:g}): one endpoint has one")
            limits[key] = (rpm if ms.rpm is None else ms.rpm, tpm if ms.tpm is None else ms.tpm,
                           conc if ms.concurrency is None else ms.concurrency)
        for who, ms in self.specs.items():
            row = lookup(ms.provider)
            url = ms.base_url or (row.default_base_url if row is not None else None)
            rpm, tpm, conc = limits[f"{ms.provider}@{url}"]
            rpm, tpm = endpoint_rate(ms.provider, rpm, tpm, rates)  # --rpm/--tpm, else the specs', else the row's
            limiter = (self.limiters.get(ms.provider, url, RateLimit(requests_per_minute=rpm, tokens_per_minute=tpm))
                       if rpm is not None or tpm is not None else None)
            slots = self.slots.get(ms.provider, url, conc if conc is not None else per_provider.get(ms.provider))
            self._endpoints[who] = (limiter, slots)

    def _policy(self) -> tuple[Any, ...]:
        from kestrel.cli.callflags import budget

        run = budget(*self.run_caps, "run")
        return tuple(b for b in (run, self.sweep) if b is not None)

    def check(self) -> None:
        """Build one agent per spec before anything runs: a missing key, SDK or price fails here."""
        for who in self.specs:
            self._agent(who, None, None)

    def _agent(self, who: str, temperature: float | None, seed: int | None) -> ModelAgent:
        from kestrel.cli.agentspec import model_agent
        from kestrel.models.callpolicy import CallPolicy

        ms = self.specs[who]
        limiter, slots = self._endpoints[who]
        policy = CallPolicy(limiter=limiter, budgets=self._policy(), cache=self.cache, slots=slots, stop=self.stop)
        return model_agent(ms.provider, ms.model, model=None, base_url=ms.base_url, api_key_env=ms.key_env,
                           timeout_s=self.timeout_s, policy=policy,
                           temperature=ms.temperature if ms.temperature is not None else temperature, seed=seed,
                           constrain=ms.constrain)

    def for_run(self, run: SweepRun) -> Agent:
        return self._agent(run.agent, run.temperature, run.seed)

    def takes(self, run: SweepRun) -> bool:
        return run.agent in self.specs

    def exhausted(self) -> str | None:
        """Why no further run should start: the sweep's spending cap refused a call."""
        b = self.sweep
        if b is None or not b.refused:
            return None
        cap = b.cap
        what = (f"${cap.max_usd:.4f}" if cap.max_usd is not None else "") + (
            " / " if cap.max_usd is not None and cap.max_tokens is not None else "") + (
            f"{cap.max_tokens:,} tokens" if cap.max_tokens is not None else "")
        return (f"spending cap: the sweep's {what} cap is reached (spent ${b.spent_usd:.4f}, "
                f"{b.spent_tokens:,} tokens)")

    def cancel(self) -> None:
        self.stop.set()

    def close(self, grace_s: float) -> None:
        """Wait (at most `grace_s`) for the calls in flight, then close the SDK clients and the cache."""
        from kestrel.models.wires import close_clients

        self.slots.wait_idle(grace_s)
        close_clients()
        if self.cache is not None:
            self.cache.close()


def direct_runner(agent_timeout: float) -> Callable[..., SessionResult]:
    from kestrel.session.runner import run_session

    return functools.partial(run_session, agent_timeout=agent_timeout)


class LoopExecutor(Executor):
    """Runs submitted calls on the worker threads of one event loop (asyncio or trio) in a
    thread of its own, at most `workers` at once; `runner` runs a session on that loop's actor
    shell from such a worker (see the module docstring)."""

    def __init__(self, backend: str, workers: int, agent_timeout: float) -> None:
        import anyio
        from anyio.from_thread import start_blocking_portal

        import sys

        self._cm = start_blocking_portal(backend=backend)
        self._portal: BlockingPortal = self._cm.__enter__()
        self._limiter = self._portal.call(lambda: anyio.CapacityLimiter(workers))
        self._timeout = agent_timeout
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._portal.start_task_soon(self._run, functools.partial(fn, *args, **kwargs))

    async def _run(self, call: Callable[[], Any]) -> Any:
        import anyio

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    def runner(self, data: MarketData, agent: Agent, options: SessionOptions, *, date: dt.date | None,
               days: int, sink: EvidenceSink | None) -> SessionResult:
        """The session on the loop's actor shell (called from one of its worker threads)."""
        import anyio.from_thread

        from kestrel.service.actors.driver import simulate

        result: SessionResult = anyio.from_thread.run(functools.partial(
            simulate, data, agent, options, date=date, days=days, sink=sink, agent_timeout=self._timeout))
        return result

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        import sys

        self._cm.__exit__(None, None, None)
        sys.setswitchinterval(self._interval)


SWITCH_INTERVAL_S = 0.001
"""The interpreter's thread switch interval while a lane runs (the default is 5 ms): a thread
whose answer arrived, or whose rate-limit slot came, takes the interpreter back from the runs'
CPU work sooner, so requests leave on time (measured by bench/model_calls.py: the direct
backend's calls span 22.1 s instead of 22.4 s for 400 calls at 19 per second)."""


class _Lane(ThreadPoolExecutor):
    """The direct backend's pool, with the switch interval set while it lives."""

    def __init__(self, workers: int) -> None:
        import sys

        super().__init__(max_workers=workers, thread_name_prefix="kestrel-sweep-run")
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        import sys

        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        sys.setswitchinterval(self._interval)


def lane_executor(backend: str, workers: int, agent_timeout: float) -> tuple[Executor, Callable[..., Any]]:
    """(executor, session runner) of the lane on `backend`."""
    if backend == "direct":
        return _Lane(workers), direct_runner(agent_timeout)
    loop = LoopExecutor(backend, workers, agent_timeout)
    return loop, loop.runner


__all__ = ["BACKENDS", "DEFAULT_CONCURRENCY", "LoopExecutor", "SweepCalls", "direct_runner", "lane_executor"]
