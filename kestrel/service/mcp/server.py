"""`build_server(host)`: Kestrel's MCP server (official SDK, `MCPServer`) over a session host.

Tools (every result structured, with an output schema): `check`, `format`, `panes`, `view`,
`simulate`, and `session_start` / `session_submit` / `session_status` / `session_result` /
`session_close`, through which the MCP client IS the agent of a session: the same bounded
authoring loop, dual budget, profiles, fail-closed stand-downs, barrier and capture as any
other agent (its replies are read by the runtime exactly like a model's text).
Resources: `kestrel://language` (the language card the model adapters use as their system
prompt), `kestrel://panes`, `kestrel://examples` and `kestrel://examples/{name}`.
Prompt: `author_plan`.

Bad input never kills the server and never writes a traceback: expected failures raise
`ToolError` with a one-line reason; anything else is logged as one line and answered as an
internal error.
"""

import datetime as dt
import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import msgspec
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from kestrel_actors.errors import describe
from kestrel.service.host import HostClient, HostError, RequestEvent, RunEnded
from kestrel.service.mcp.schema import (
    CheckResult,
    CloseResult,
    Diagnostic,
    FormatResult,
    PanesResult,
    AgentRequestInfo,
    SessionResultDoc,
    StartResult,
    StatusResult,
    SubmitResult,
    Summary,
    ViewResult,
)
from kestrel import __version__
from kestrel.logs import get_logger
from kestrel.session.spec import RunSpec, SpecError

P = ParamSpec("P")
R = TypeVar("R")

MAX_TOKENS_PER_CALL = 10**9
"""The most tokens a client may report for one call's input or output."""
MAX_REPLY_CHARS = 1_000_000
"""Replies longer than this are refused outright; shorter ones over the language's document
limit reach the loop, which answers them with a repair like any invalid reply."""
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

INSTRUCTIONS = (
    "Kestrel: author bounded trading plans in a typed, token-efficient language; the runtime "
    "fires them at the tick against frozen market data. Read kestrel://language first. "
    "`check`/`format` validate documents; `panes`/`view` show the market; `simulate` runs one "
    "plan over a session. To BE the agent of a session: `session_start`, then answer each "
    "request with exactly one statement (PLAN, VIEW, STANDDOWN or PASS) via `session_submit` "
    "until it returns done; `session_result` gives the summary, ledger and capture."
)


def _tool(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Expected failures → `ToolError`; anything else → one log line and an internal error."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except (HostError, SpecError) as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # a bug: never a traceback at the client or on stderr
            get_logger("kestrel.mcp").error("tool.internal_error", tool=fn.__name__, error=describe(exc))
            raise ToolError(f"internal error in {fn.__name__}: {describe(exc)} (a bug in Kestrel)") from None

    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")  # the tool's description, unindented
    return wrapper


def _diagnostics(err: Any) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in err.diagnostics:
        item: Diagnostic = {"line": d.line, "col": d.column, "message": d.message, "code": d.code}
        if d.hint:
            item["hint"] = d.hint
        out.append(item)
    return out


def _request(event: RequestEvent) -> AgentRequestInfo:
    r = event.request
    left = r.budget_left
    return {
        "date": r.date,
        "ordinal": r.ordinal,
        "iteration": r.iteration,
        "briefing": r.briefing,
        "repair_error": r.repair_error,
        "view_name": r.view_name,
        "budget_left": None if left is None else {"iterations": left.iterations, "tokens": left.tokens},
    }


def _checkpoints(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(c.strip() for c in items if c.strip())


def _spec(data: str, date: str | None, days: int, checkpoints: str | list[str] | None,
          **posture: Any) -> RunSpec:
    try:
        return RunSpec(data=data, date=date, days=days, checkpoints=_checkpoints(checkpoints), **posture)
    except (TypeError, msgspec.ValidationError) as exc:
        raise ToolError(str(exc)) from None


def _summary(result: Any, data: Any) -> Summary:
    from kestrel.report.summary import summary

    doc: Summary = summary(result, data)  # type: ignore[assignment]
    return doc


def _outcome(session_id: str, outcome: RequestEvent | RunEnded) -> SubmitResult:
    if isinstance(outcome, RequestEvent):
        return {"session_id": session_id, "done": False, "request": _request(outcome)}
    doc: SubmitResult = {"session_id": session_id, "done": True, "state": outcome.state}
    if outcome.summary is not None:
        doc["summary"] = outcome.summary  # type: ignore[typeddict-item]
    if outcome.reason is not None:
        doc["reason"] = outcome.reason
    return doc


def language_card() -> str:
    from kestrel.models.card import language_card as card

    return card()


class KestrelServer(MCPServer[Any]):
    """`MCPServer` whose unknown prompt is a protocol error naming it in both client modes
    (the SDK raises a ValueError there, which the modern dispatcher answers as an internal
    error), and whose argument errors are one line."""

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:
        names = sorted(p.name for p in await self.list_prompts())
        if name not in names:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; the prompts are {', '.join(names)}")
        return await super().get_prompt(name, arguments, context)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's call, with arguments that fail validation reported in one line naming
        each argument and what it must be (the SDK's text is pydantic's multi-line report)."""
        from pydantic import ValidationError

        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg'].lower()}" for e in cause.errors())
            raise ToolError(f"Error executing tool {name}: invalid arguments: {problems}") from None


def build_server(host: HostClient, *, agent_id: str = "mcp") -> MCPServer[Any]:
    """The MCP server over `host`; `agent_id` is recorded in captures of client sessions."""
    server: MCPServer[Any] = KestrelServer(
        "kestrel", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool()
    @_tool
    async def check(source: str) -> CheckResult:
        """Check a Kestrel document: valid or diagnostics (line, col, message, hint); the
        canonical text when valid."""
        from kestrel.lang import LangError, format_source

        try:
            canonical = format_source(source)
        except LangError as err:
            return {"valid": False, "diagnostics": _diagnostics(err)}
        return {"valid": True, "diagnostics": [], "canonical": canonical}

    @server.tool(name="format")
    @_tool
    async def format_(source: str) -> FormatResult:
        """The canonical text of a Kestrel document (or its diagnostics when invalid)."""
        from kestrel.lang import LangError, format_source

        try:
            return {"valid": True, "diagnostics": [], "text": format_source(source)}
        except LangError as err:
            return {"valid": False, "diagnostics": _diagnostics(err)}

    def catalog() -> PanesResult:
        from kestrel.frame.catalog import DEFAULT_CATALOG as cat

        return {
            "panes": cat.describe(),  # type: ignore[typeddict-item]
            "kernel_ids": list(cat.kernel_ids),
            "budget": {"default": cat.default_budget, "min": cat.min_budget, "max": cat.max_budget},
        }

    @server.tool()
    @_tool
    async def panes() -> PanesResult:
        """The pane catalog: names, arguments with defaults and ranges, reserved kernel ids,
        the VIEW budget range."""
        return catalog()

    @server.tool()
    @_tool
    async def view(view: str, at: str, data: str = "sample", date: str | None = None, news: str | None = None,
                   blind: bool = False) -> ViewResult:
        """Render a VIEW (e.g. "VIEW v: quote, bars(5m, 12) BUDGET 600") on the snapshot
        frozen at `at` (hh:mm) minus the 5-minute guard, on session `date` (default: the
        data's last) of `data` ('sample' or a CSV/Parquet path); `news`: a news file for the
        news pane; `blind`: blind mode."""
        from kestrel.frame import ViewError, freeze, materialize, resolve_view
        from kestrel.frame.ordinal import AtError, view_ordinal
        from kestrel.frame.text import estimate_tokens
        from kestrel.lang import LangError, View, parse
        from kestrel.session.schedule import DEFAULT_GUARD_S

        try:
            stmt = parse(view)
        except LangError as err:
            raise ToolError(f"invalid VIEW: {err}") from None
        if not isinstance(stmt, View):
            raise ToolError(f"expected one VIEW statement, got {type(stmt).__name__}")
        run = await host.resolve(_spec(data, date, 1, None, news=news, blind=blind))
        session = run.schedule[0].session
        try:  # the rule of `kestrel view --at`: a time from the open to the close
            ordinal = view_ordinal(session, at, flag="at", where="the session")
        except AtError as err:
            raise ToolError(str(err)) from None
        at_ns = ordinal.time_ns
        try:
            resolved = resolve_view(stmt, ordinal)
        except ViewError as err:
            raise ToolError(str(err)) from None
        guard_ns = DEFAULT_GUARD_S * 1_000_000_000
        from kestrel.session.blind import blind_of

        snap = freeze(run.data, at_ns, guard_ns, news=run.options.news,
                      blind=blind_of(run.data) if run.options.blind else None)
        text = materialize(resolved, snap)
        cutoff = dt.datetime.fromtimestamp((at_ns - guard_ns) / 1e9, session.zone)
        return {
            "text": text,
            "tokens": estimate_tokens(text),
            "panes": [p.name for p in stmt.panes],
            "budget": resolved.budget,
            "date": snap.session_label(),
            "cutoff": cutoff.strftime("%H:%M:%S"),
        }

    @server.tool()
    @_tool
    async def simulate(plan: str, data: str = "sample", date: str | None = None, days: int = 1,
                       checkpoints: str | list[str] | None = None, news: str | None = None) -> Summary:
        """Arm `plan` at every session's OPEN and pass at the checkpoints (the fixed agent):
        returns exactly the `kestrel simulate --agent fixed:NAME.kes --json` summary, NAME
        being the plan's name."""
        from kestrel.agents.fixed import FixedAgent, parse_plan
        from kestrel.engine.engine import Engine
        from kestrel.session.runner import engine_config

        try:
            agent = FixedAgent(plan, name=parse_plan(plan, "plan").name, source="plan")
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        run = await host.resolve(_spec(data, date, days, checkpoints, news=news))
        first = run.schedule[0].session
        try:
            Engine(engine_config(run.options, run.data), first, run.data.symbol, run.data.tick_size).arm(agent.plan)
        except ValueError as exc:
            raise ToolError(f"the engine refuses plan {agent.plan.name!r}: {exc}") from None
        return _summary(await host.run(run, agent), run.data)

    @server.tool()
    @_tool
    async def session_start(
        data: str = "sample",
        date: str | None = None,
        days: int = 1,
        checkpoints: str | list[str] | None = None,
        profile: str | None = None,
        max_iterations: int | None = None,
        token_budget: int | None = None,
        effort: str | None = None,
        news: str | None = None,
        blind: bool = False,
    ) -> StartResult:
        """Start a session whose agent is YOU: returns the session id and the first request
        (a briefing). Answer each request with session_submit. `news`: a news file (JSON lines,
        CSV, Parquet) for the news pane; `blind`: blind mode (an alias, session numbers, prices
        rescaled so the first is 100, masked news; plans written in that scale)."""
        spec = _spec(data, date, days, checkpoints, profile=profile, max_iterations=max_iterations,
                     token_budget=token_budget, effort=effort, news=news, blind=blind)
        started = await host.start(spec, agent_id=agent_id, model="mcp-client")
        out = _outcome(started.session_id, started.outcome)
        doc: StartResult = {"session_id": started.session_id, "done": out["done"]}
        if "request" in out:
            doc["request"] = out["request"]
        if "summary" in out:
            doc["summary"] = out["summary"]
        return doc

    @server.tool()
    @_tool
    async def session_submit(session_id: str, reply: str, input_tokens: int | None = None,
                             output_tokens: int | None = None) -> SubmitResult:
        """Answer the session's waiting request with ONE statement (PLAN, VIEW, STANDDOWN or
        PASS). Returns the next request (same ordinal after a view or a repair, the next
        ordinal after a terminal turn) or done with the summary. Token counts you do not
        report are estimated from the request and reply text."""
        if len(reply) > MAX_REPLY_CHARS:
            raise ToolError(
                f"reply of {len(reply)} characters is over the {MAX_REPLY_CHARS} limit: "
                "answer with one statement"
            )
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if value is not None and not 0 <= value <= MAX_TOKENS_PER_CALL:
                shown = value if abs(value) < 10**18 else "a larger number"
                raise ToolError(f"{name} must be 0 to {MAX_TOKENS_PER_CALL:_} (tokens of this call), got {shown}")
        return _outcome(session_id, await host.submit(session_id, reply, input_tokens, output_tokens))

    @server.tool()
    @_tool
    async def session_status(session_id: str) -> StatusResult:
        """The session's state (waiting, running, done, failed), turns so far and the
        request waiting for a reply, if any."""
        s = await host.status(session_id)
        pending = None if s.pending is None else _request(RequestEvent(s.pending))
        return {
            "session_id": s.session_id, "state": s.state, "agent": s.agent, "data": s.data,
            "symbol": s.symbol, "dates": s.dates, "schedule": s.schedule, "turns": s.turns,
            "events": s.events, "request": pending, "reason": s.reason,
        }

    @server.tool()
    @_tool
    async def session_result(session_id: str) -> SessionResultDoc:
        """A finished session's summary, ledger and capture (the exact JSON-lines text
        `kestrel simulate --ledger/--capture` writes; the capture replays with
        `kestrel replay`)."""
        result = await host.result(session_id)
        data = await host.data.load((await host.status(session_id)).data)
        return {
            "session_id": session_id,
            "summary": _summary(result, data),
            "ledger": result.ledger_jsonl().decode(),
            "capture": result.capture_jsonl().decode(),
        }

    @server.tool()
    @_tool
    async def session_close(session_id: str) -> CloseResult:
        """Forget a session (a running one stands down and stops first)."""
        closed = await host.close(session_id)
        return {"session_id": closed.session_id, "closed": True, "state": closed.state}

    @server.resource("kestrel://language", mime_type="text/markdown")
    def language() -> str:
        """The Kestrel language card (the system prompt the model adapters use)."""
        return language_card()

    @server.resource("kestrel://panes", mime_type="application/json")
    def panes_resource() -> str:
        """The pane catalog as JSON."""
        return msgspec.json.encode(catalog()).decode()

    @server.resource("kestrel://examples", mime_type="application/json")
    def examples() -> str:
        """The names of the example plans."""
        names = sorted(p.stem for p in EXAMPLES.glob("*.kes")) if EXAMPLES.is_dir() else []
        return msgspec.json.encode(names).decode()

    @server.resource("kestrel://examples/{name}", mime_type="text/plain")
    def example(name: str) -> str:
        """One example plan (`kestrel://examples` lists the names)."""
        path = EXAMPLES / f"{name}.kes"
        if not _NAME.match(name) or not path.is_file():
            raise ResourceNotFoundError(f"no example named {name!r}: read kestrel://examples for the names")
        return path.read_text(encoding="utf-8")

    @server.prompt()
    def author_plan(goal: str = "", symbol: str = "") -> str:
        """Instructions to author one Kestrel plan for a session (the language card, then the
        task)."""
        task = goal.strip() or "trade the session with a bounded plan, or stand down"
        on = f" on {symbol.strip()}" if symbol.strip() else ""
        return (
            f"{language_card()}\n\n# Task\n{task}{on}.\n"
            "Start a session with the `session_start` tool, read each request's briefing and "
            "answer with `session_submit`: exactly one statement (PLAN, VIEW, STANDDOWN or PASS). "
            "Use `check` to validate a plan before submitting it if unsure."
        )

    return server


__all__ = ["EXAMPLES", "INSTRUCTIONS", "MAX_REPLY_CHARS", "MAX_TOKENS_PER_CALL", "build_server", "language_card"]
