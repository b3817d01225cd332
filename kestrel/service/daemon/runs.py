"""`Runs`: the daemon's runs on the session host, committed to the store as they happen.

- `submit`: the flags are resolved (a bad one is refused before anything is stored), the run
  is committed, then started on the host; the reply follows the commit.
- `observe` is the host's observer: every terminal turn (with its ordinal's evidence, in the
  same transaction) and every batch of ledger events is queued for the one writer in the
  order it happened (the session waits only when the queue is full) and group-committed
  within 20 ms (`kestrel.service.daemon.writer.LINGER_S`), sooner when a commit somebody waits for
  (a submit, an end, a cancel) takes it along.
  Everything a client sees (follow, show, wait, export, the reply to submit and cancel) is
  read from or follows a commit, so nothing is acknowledged that is not durable, and the
  store always holds a prefix of each run's records.
- `resume`: at start, every run the store holds as running is started again with its
  committed turns, which the host answers from the record (the agent is not called for them),
  the engine re-running deterministically through them; ticks up to the crash point go at
  once, then the run continues at its pace. Records it re-emits are already stored and ignored
  (`ON CONFLICT DO NOTHING`), so the store never holds a duplicate and the final ledger is the
  uninterrupted run's.
- the end of a run commits its state, its exact ledger, capture and summary, and an `end`
  record; `wait` and `follow` wake on each commit of their run.

The daemon survives its disk and its data: a store that cannot write for a while (a full disk)
pauses the writer, and with it the runs, until it can (`kestrel.service.daemon.writer`); a
submit while it is paused is refused with the reason; any other failure of a run (its store
commit, its data, a bug) fails that run with the reason, never the daemon. At resume, each
stored run is taken on its own: one that cannot be resumed (a row that does not decode, a
signature that does not verify, flags that no longer resolve) is marked failed with its reason
and the others resume.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import msgspec
from anyio.abc import TaskGroup

from kestrel.service.daemon.store import Ended, Insert, NewRun, Op, Reader, Resumed
from kestrel.service.daemon.writer import Batch, Writer
from kestrel.service.actors.feed import Pace
from kestrel.service.host import (
    EvidenceEvent,
    HostClient,
    HostError,
    LedgerEvents,
    PortfolioLedgerLines,
    PortfolioTurnEvent,
    RunEnded,
    SessionEvent,
    TurnEvent,
    UniverseRun,
    universe_capture,
)
from kestrel.service.host.universe import partial_capture
from kestrel.service.daemon.protocol import TERMINAL_STATES, RunInfo, Submitted
from kestrel.agents.resume import ResumeError, skip_committed
from kestrel.engine.ledger import Ledger
from kestrel.logs import get_logger
from kestrel.outputs import atomic_write
from kestrel.session.capture import CapturedTurn
from kestrel.session.loop import Evidence
from kestrel.session.pace import pace_name
from kestrel.session.portfolio import CapturedPortfolioTurn
from kestrel.session.protocol import Agent
from kestrel.session.spec import ResolvedRun

_enc = msgspec.json.Encoder(order="deterministic")
Slot = tuple[str, str]
Committed = list[CapturedTurn] | list[CapturedPortfolioTurn]
SUBMIT_WAIT_S = 20.0
"""How long a submit waits for its run's commit before it is refused (a paused store)."""


START_MARKS_WAIT_S = 10.0
"""How long start-up waits for its marks to commit (each resumed run counted, each run that
cannot be resumed failed) before the daemon serves without them."""


class Refusal(ValueError):
    """A request the daemon cannot do (unknown run, bad flags, ...); the text says why."""


@dataclass
class Job:
    """A resolved submission: what runs, who authors, how fast, where the files go at the end,
    how long one agent call may take (the submit's `--agent-timeout`)."""

    run: ResolvedRun | UniverseRun
    agent: Agent
    pace: float | None
    outputs: dict[str, str] = field(default_factory=dict)
    agent_timeout: float | None = None


class Planner(Protocol):
    """Turns `kestrel ctl submit` flags into a `Job` (the CLI provides it: the same resolution
    as `kestrel simulate`). Both raise ValueError with a one-line reason."""

    def parse(self, argv: list[str], cwd: str) -> tuple[dict[str, Any], list[str]]:
        """(flags to store, the argv with paths made absolute)."""
        ...

    def resolve(self, flags: dict[str, Any]) -> Job: ...


@dataclass
class LiveRun:
    run: str
    changed: anyio.Event = field(default_factory=anyio.Event)
    cancelled: bool = False
    broken: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    seen: dict[Slot, int] = field(default_factory=dict)


def ledger_line(event: Any) -> bytes:
    return Ledger([event]).to_jsonl().rstrip(b"\n")


class Runs:
    def __init__(self, host: HostClient, writer: Writer, reader: Reader, planner: Planner, tg: TaskGroup) -> None:
        self.host = host
        self.writer = writer
        self.reader = reader
        self.planner = planner
        self.tg = tg
        self.live: dict[str, LiveRun] = {}
        self.log = get_logger("kestrel.service.daemon")

    # -- commits --------------------------------------------------------------------------

    def on_commit(self, ops: Sequence[Op]) -> None:
        """Wake the waiters and followers of every run `ops` touched (after the commit)."""
        for run in {op.run for op in ops}:
            live = self.live.get(run)
            if live is not None:
                event, live.changed = live.changed, anyio.Event()
                event.set()

    def on_error(self, ops: Sequence[Op], error: BaseException) -> None:
        """A failed commit breaks the runs it carried (they end failed, naming the error)."""
        from kestrel_actors.errors import describe

        for run in {op.run for op in ops}:
            live = self.live.get(run)
            if live is not None and live.broken is None:
                live.broken = f"the store could not commit: {describe(error)}"
        self.log.error("store.commit_failed", runs=sorted({op.run for op in ops}), error=str(error))

    async def observe(self, session_id: str, event: SessionEvent) -> None:
        """The host's observer: queue what `event` carries for the writer, in order."""
        live = self.live.get(session_id)
        if live is None:
            return
        ops: list[Op] = []
        if isinstance(event, EvidenceEvent):
            live.evidence.append(event.record)  # committed with its turn, in one transaction
            return
        if isinstance(event, TurnEvent | PortfolioTurnEvent):
            t = event.turn
            for record in live.evidence:
                slot = (record.date or t.date, record.ordinal)
                k = live.seen.get(slot, 0)
                live.seen[slot] = k + 1
                ops.append(Insert(live.run, "evidence", f"{slot[0]}/{slot[1]}/{k}", _enc.encode(record)))
            live.evidence = []
            ops.append(Insert(live.run, "turn", f"{t.date}/{t.ordinal}", _enc.encode(t)))
        elif isinstance(event, LedgerEvents):
            ops = [Insert(live.run, "ledger", f"{event.date}/{event.index + i:07d}", ledger_line(e))
                   for i, e in enumerate(event.events)]
        elif isinstance(event, PortfolioLedgerLines):  # a universe's lines, numbered run-wide
            ops = [Insert(live.run, "ledger", f"{event.date}/{event.index + i:07d}", line)
                   for i, line in enumerate(event.jsonl.splitlines())]
        if ops:
            await self.writer.enqueue(ops)

    # -- submit, resume, drive ------------------------------------------------------------

    async def submit(self, argv: list[str], cwd: str) -> Submitted:
        if self.writer.paused is not None:
            raise Refusal(f"the store cannot write now ({self.writer.paused}): the daemon waits for it; "
                          "submit again once it can (e.g. once the disk has space)")
        try:
            flags, canonical = self.planner.parse(argv, cwd)
            job = await anyio.to_thread.run_sync(self.planner.resolve, flags)
        except ValueError as exc:
            raise Refusal(str(exc)) from None
        run = f"r{secrets.token_hex(5)}"
        pace = pace_name(job.pace)
        self.live[run] = LiveRun(run)
        stored = await self.writer.enqueue([NewRun(run, _enc.encode(flags), _enc.encode(canonical), pace)],
                                           urgent=True)
        self.tg.start_soon(self._drive, run, job, [], 0)  # its records queue up behind the run's
        try:
            with anyio.fail_after(SUBMIT_WAIT_S):
                await self.writer.wait(stored)  # the reply follows the commit
        except TimeoutError:  # the store paused meanwhile: refuse now, record it as refused later
            self.live[run].cancelled = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.host.close(run)
                except HostError:
                    pass
            why = f"the store cannot write now ({self.writer.paused or 'its commit is slow'})"
            body = _enc.encode({"state": "cancelled", "reason": f"refused at submit: {why}", "summary": None})
            await self.writer.enqueue([Insert(run, "end", "end", body), Ended(run, "cancelled", f"refused at submit: {why}")])
            self.live.pop(run, None)
            raise Refusal(f"{why}: the run was not accepted; submit it again once the store can write") from None
        except Exception as exc:
            self.live[run].cancelled = True
            with anyio.move_on_after(5):
                try:
                    await self.host.close(run)
                except HostError:
                    pass
            raise Refusal(f"the store could not commit the run: {exc}") from None
        self.log.info("run.submitted", run=run, argv=canonical, pace=pace)
        return Submitted(run, pace)

    async def resume_all(self) -> int:
        """Start every run the store holds as running again (see the module docstring); a run
        that cannot be resumed is marked failed with its reason, and each resumed one counted as
        resumed, before this returns (so before the daemon serves), unless the store cannot commit
        within `START_MARKS_WAIT_S`; those marks then land once it can. Returns how many were found."""
        stored = self.reader.unfinished()
        marked: list[anyio.Event] = []
        counted: list[Batch] = []
        for s in stored:
            self.live[s.run] = LiveRun(s.run)
            try:
                if s.problem is not None:
                    raise ValueError(s.problem)
                counted.append(await self._resume(s))
            except Exception as exc:  # this run only: the others still resume
                from kestrel_actors.errors import describe

                why = str(exc) if isinstance(exc, ValueError) else describe(exc)
                self.log.warning("run.not_resumed", run=s.run, reason=why)
                done = anyio.Event()
                marked.append(done)
                self.tg.start_soon(self._mark_failed, s.run, f"cannot resume: {why}", done)
        with anyio.move_on_after(START_MARKS_WAIT_S):
            for done in marked:
                await done.wait()
            for batch in counted:
                try:
                    await self.writer.wait(batch)
                except Exception as exc:  # the run goes on; its count lands with a later commit or not
                    from kestrel_actors.errors import describe

                    self.log.warning("run.resume_not_counted", error=describe(exc))
        return len(stored)

    async def _mark_failed(self, run: str, reason: str, done: anyio.Event) -> None:
        try:
            await self._end_quietly(run, "failed", reason)
        finally:
            done.set()

    async def _resume(self, s: Any) -> Batch:
        """Start `s` again; the batch that counts it as resumed (queued, not awaited)."""
        try:
            job = await anyio.to_thread.run_sync(self.planner.resolve, s.flags)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        rows = self.reader.events(s.run, kinds=("turn",), limit=1_000_000)
        if isinstance(job.run, UniverseRun):  # re-run through its committed turns, the rest asked
            try:
                turns = [msgspec.json.decode(r[3], type=CapturedPortfolioTurn) for r in rows]
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise ValueError(f"a committed turn does not decode ({exc})") from None
            batch = await self.writer.enqueue([Resumed(s.run)], urgent=True)
            self.log.info("run.resumed", run=s.run, committed_turns=len(turns), resume_ns=0)
            self.tg.start_soon(self._drive, s.run, job, turns, 0)
            return batch
        try:
            committed = [msgspec.json.decode(r[3], type=CapturedTurn) for r in rows]
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"a committed turn does not decode ({exc})") from None
        try:
            skip_committed(job.agent, committed)  # a file agent continues after them
        except ResumeError as exc:
            raise ValueError(str(exc)) from None
        ledger = self.reader.events(s.run, kinds=("ledger",), limit=1_000_000)
        try:
            at = resume_point(job.run, committed, ledger)
        except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a committed ledger event does not decode ({exc})") from None
        batch = await self.writer.enqueue([Resumed(s.run)], urgent=True)  # not awaited here: a paused store waits
        self.log.info("run.resumed", run=s.run, committed_turns=len(committed), resume_ns=at)
        self.tg.start_soon(self._drive, s.run, job, committed, at)
        return batch

    async def _end_quietly(self, run: str, state: str, reason: str) -> None:
        """`_end`, its own failure logged (the run stays unfinished in the store)."""
        try:
            await self._end(run, state, reason)
        except Exception as exc:
            from kestrel_actors.errors import describe

            self.live.pop(run, None)
            self.log.error("run.end_not_committed", run=run, state=state, error=describe(exc))

    async def _drive(self, run: str, job: Job, committed: Committed, resume_ns: int) -> None:
        """Run `run` to its end; whatever fails in it fails the run, never the daemon."""
        try:
            await self._run(run, job, committed, resume_ns)
        except Exception as exc:
            from kestrel_actors.errors import describe

            self.log.error("run.failed", run=run, error=describe(exc))
            live = self.live.get(run)
            if live is not None and not live.cancelled:
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    try:
                        await self.host.close(run)
                    except HostError:
                        pass
                await self._end_quietly(run, "failed", f"the run failed: {describe(exc)}")

    async def _run(self, run: str, job: Job, committed: Committed, resume_ns: int) -> None:
        live = self.live[run]
        if live.cancelled:
            return
        try:
            pace = None if job.pace is None else Pace(job.pace, resume_ns)
            started = await self.host.start(job.run, job.agent, agent_id=job.agent.agent_id,
                                            committed=committed, pace=pace, session_id=run,
                                            agent_timeout=job.agent_timeout)
            outcome = started.outcome
            while not isinstance(outcome, RunEnded):
                outcome = await self.host.next_outcome(run, outcome.seq)
            if live.cancelled:
                return
            if outcome.state == "failed" and live.broken is None and outcome.summary is not None \
                    and isinstance(job.run, ResolvedRun):
                # the run ran to its end but its agent could not work: kept, exportable, failed
                failed = await self.host.result(run)
                await self._end(run, "failed", outcome.reason, outcome.summary, failed.ledger_jsonl(),
                                failed.capture_jsonl())
                await self.host.close(run)
                return
            if outcome.state != "done" or live.broken is not None:
                await self._end(run, "failed", live.broken or outcome.reason or f"the session ended {outcome.state}")
                return
            ledger, capture = await self._artifacts(run, job)
            if job.outputs:  # written before the end is committed: `done` means they are there
                await self.writer.commit([])  # every record of the run is in the store now
                files = {"ledger": ledger, "capture": capture, "evidence": self.evidence_jsonl(run)}
                lost = await anyio.to_thread.run_sync(self._write_outputs, run, job, files)
                if lost:  # as `kestrel simulate`: an output that cannot be written fails the run
                    await self._end(run, "failed", lost, outcome.summary, ledger, capture)
                    await self.host.close(run)
                    return
            await self._end(run, "done", None, outcome.summary, ledger, capture)
            await self.host.close(run)
        except HostError as exc:
            if not live.cancelled:
                await self._end(run, "failed", str(exc))

    async def _artifacts(self, run: str, job: Job) -> tuple[bytes, bytes]:
        """The finished session's ledger and capture, exactly as `kestrel simulate` writes them."""
        if isinstance(job.run, UniverseRun):
            done = await self.host.universe_result(run)
            return done.ledger.to_jsonl(), universe_capture(job.run, done)
        result = await self.host.result(run)
        return result.ledger_jsonl(), result.capture_jsonl()

    async def _end(self, run: str, state: str, reason: str | None, summary: Any = None,
                   ledger: bytes | None = None, capture: bytes | None = None) -> None:
        body = _enc.encode({"state": state, "reason": reason, "summary": summary})
        doc = None if summary is None else _enc.encode(summary)
        await self.writer.commit([Insert(run, "end", "end", body), Ended(run, state, reason, doc, ledger, capture)])
        self.live.pop(run, None)  # its waiters were woken by the commit and read the end
        self.log.info("run.ended", run=run, state=state, reason=reason)

    def _write_outputs(self, run: str, job: Job, files: dict[str, bytes]) -> str | None:
        """Write the run's requested outputs; the reason they were not all written, if so."""
        lost: list[str] = []
        for kind, path in job.outputs.items():
            try:
                atomic_write(path, files[kind])
            except OSError as exc:
                self.log.error("run.output_failed", run=run, path=path, error=exc.strerror or str(exc))
                lost.append(f"cannot write --{kind} {path}: {exc.strerror or exc}")
        return "; ".join(lost) + " (its ledger and capture are kept: `kestrel ctl export`)" if lost else None

    # -- queries --------------------------------------------------------------------------

    def info(self, run: str) -> RunInfo:
        info = self.reader.info(run)
        if info is None:
            raise Refusal(f"unknown run {run!r} (`kestrel ctl runs` lists them)")
        return info

    async def cancel(self, run: str) -> RunInfo:
        info = self.info(run)
        live = self.live.get(run)
        if info.state in TERMINAL_STATES or live is None:
            raise Refusal(f"run {run} is {info.state}: nothing to cancel")
        live.cancelled = True
        try:
            await self.host.close(run)
        except HostError:
            pass  # not started yet or already gone: the store decides
        await self._end(run, "cancelled", "cancelled by `kestrel ctl cancel`")
        return self.info(run)

    async def wait(self, run: str, timeout: float | None) -> RunInfo | None:
        """The run once it has ended, or None when `timeout` passed first."""
        with anyio.move_on_after(timeout):
            while True:
                live = self.live.get(run)
                changed = None if live is None else live.changed
                info = self.info(run)
                if info.state in TERMINAL_STATES or changed is None:
                    return info
                await changed.wait()
        return None

    def export(self, run: str) -> tuple[bytes, bytes, bytes]:
        """(ledger, capture, evidence) of an ended run: a finished one exactly as `simulate`
        writes them; a cancelled or failed one without kept files as far as it went, rebuilt
        from its stored records (`recorded`)."""
        info = self.info(run)
        state, ledger, capture = self.reader.artifacts(run)
        if ledger is None or capture is None:  # kept by `done` and by a run whose outputs were lost
            if state not in ("cancelled", "failed"):
                raise Refusal(f"run {run} is {state}: wait for it to end (`kestrel ctl wait {run}`), then export it")
            ledger, capture = self.recorded(run, state, info.reason)
        return ledger, capture, self.evidence_jsonl(run)

    def recorded(self, run: str, state: str, reason: str | None) -> tuple[bytes, bytes]:
        """(ledger, capture) of a run that ended early, from the store: every ledger event and
        every terminal turn committed, in order, under the header its flags give (without a
        `ledger_sha256`: the capture of an incomplete run, as an interrupted `simulate
        --capture` leaves it). Replay of it reproduces the ledger up to its last turn."""
        from kestrel.session.capture import encode_capture
        from kestrel.session.results import capture_header

        flags = self.reader.flags(run)
        try:
            if flags is None:
                raise ValueError("its flags are not stored")
            job = self.planner.resolve(flags)
        except ValueError as exc:
            why = f" ({reason})" if reason else ""
            raise Refusal(f"run {run} is {state}{why}; its capture cannot be rebuilt: {exc}") from None
        rows = self.reader.events(run, kinds=("turn",), limit=10_000_000)
        ledger = b"".join(r[3] + b"\n" for r in self.reader.events(run, kinds=("ledger",), limit=10_000_000))
        if isinstance(job.run, UniverseRun):
            done = [msgspec.json.decode(r[3], type=CapturedPortfolioTurn) for r in rows]
            return ledger, partial_capture(job.run, job.agent.agent_id, done)
        turns = [msgspec.json.decode(r[3], type=CapturedTurn) for r in rows]
        header = capture_header(job.run.data, job.run.schedule, job.agent.agent_id, job.run.options)
        return ledger, encode_capture(header, turns)

    def evidence_jsonl(self, run: str) -> bytes:
        import io

        from kestrel.logs import json_sink
        from kestrel.session.runner import evidence_logger

        out = io.StringIO()
        sink = evidence_logger(json_sink(out))
        for row in self.reader.events(run, kinds=("evidence",), limit=10_000_000):
            sink(msgspec.json.decode(row[3], type=Evidence))
        return out.getvalue().encode()


def resume_point(run: ResolvedRun, committed: list[CapturedTurn], ledger_rows: list[tuple[int, str, str, bytes]]) -> int:
    """The market time a crashed run had surely reached: its last committed ledger event or
    the cutoff of its last committed turn, whichever is later (0 when nothing was committed)."""
    at = 0
    if ledger_rows:
        at = int(msgspec.json.decode(ledger_rows[-1][3])["ts"])
    if committed:
        last = committed[-1]
        for day in run.schedule:
            if day.date == last.date:
                for o in day.ordinals:
                    if o.label == last.ordinal:
                        at = max(at, day.cutoff(o))
    return at


__all__ = ["Job", "LiveRun", "Planner", "Refusal", "Runs", "ledger_line", "resume_point"]
