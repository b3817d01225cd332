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
internal error that names no detail of the server (a reference to its log line instead).

Every argument is hostile (the client is usually a language model, over HTTP any local user
holding a token): data is read only under the server's data roots (`DataRoots`); every call is
bounded by `ServiceLimits` — documents and replies by length before any processing, runs by
days, checkpoints, iterations and token budgets, the call by a wall clock (and its worker
thread's CPU time), after which, or when the client hangs up, it is cancelled and its session
closed. Sessions belong to the client identity that started them (`owner`): another client
naming one gets the answer for an unknown session. Error texts are one line, control
characters escaped, capped, and name paths as the client wrote them.
"""

import datetime as dt
import functools
import inspect
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, ParamSpec, TypeVar

import anyio
import msgspec
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Strict, ValidationError

from kestrel_actors.errors import describe
from kestrel.service.host import HostClient, HostError, RequestEvent, RunEnded, universe_summary
from kestrel.service.mcp.universe import Budgeted, check_module, simulate_universe_run, universe_spec
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits, cap_text
from kestrel.service.host.pool import Budget, OverBudget, PoolBusy
from kestrel.service.host.roots import DataRefused, DataRoots, shown
from kestrel.terminal import printable
from kestrel.service.mcp.schema import (
    AnySummary,
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
from kestrel.session.portfolio import PortfolioResult
from kestrel.session.spec import RunSpec, SpecError

P = ParamSpec("P")
R = TypeVar("R")

Whole = Annotated[int, Strict()]
"""A count argument (`days`, budgets, token counts): a JSON integer, as `--json` has it; a
string, a boolean or a fraction is refused naming the argument (no `true` read as 1 day)."""

MAX_TOKENS_PER_CALL = DEFAULT_LIMITS.max_tokens_per_call
"""The most tokens a client may report for one call's input or output."""
MAX_REPLY_CHARS = DEFAULT_LIMITS.max_reply_chars
"""Replies longer than this are refused outright; shorter ones over the language's document
limit reach the loop, which answers them with a repair like any invalid reply."""
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
STDIO_CLIENT = "stdio"
"""The owner of sessions started over stdio or in process (one client: the one connected)."""
CLIENT_KEY = "kestrel.client"
"""ASGI scope key: the identity the HTTP front door authenticated (`kestrel.service.mcp.http`)."""
DISCONNECTED_KEY = "kestrel.disconnected"
"""ASGI scope key: an `anyio.Event` set when the HTTP client hangs up."""

INSTRUCTIONS = (
    "Kestrel: author bounded trading plans in a typed, token-efficient language; the runtime "
    "fires them at the tick against frozen market data. Read kestrel://language first. "
    "`check`/`format` validate documents; `panes`/`view` show the market; `simulate` runs one "
    "plan over a session. To BE the agent of a session: `session_start`, then answer each "
    "request with exactly one statement (PLAN, VIEW, STANDDOWN or PASS) via `session_submit` "
    "until it returns done; `session_result` gives the summary, ledger and capture."
)


@dataclass
class ToolCall:
    """One tool call: who asks (`owner`), the paths to show as the client wrote them, and the
    budget of the work it runs on a worker thread."""

    owner: str
    limits: ServiceLimits
    written: dict[str, str] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)

    def scrub(self, text: str) -> str:
        """`text` for the client: its paths as it wrote them (never the server's real paths),
        one line, control characters escaped, capped."""
        for real, written in sorted(self.written.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(real, written)
        text = " ".join(text.split())
        text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                       for c in text)
        return cap_text(text, self.limits.max_error_chars)


_CALL: ContextVar[ToolCall] = ContextVar("kestrel_mcp_call")


def current_call() -> ToolCall:
    return _CALL.get()


def _client_of(ctx: Any) -> tuple[str | None, Any]:
    """(the authenticated identity, the disconnect event) of an HTTP call; (STDIO_CLIENT, None)
    over stdio or in process."""
    request = getattr(getattr(ctx, "request_context", None), "request", None) if ctx is not None else None
    scope: Mapping[str, Any] | None = getattr(request, "scope", None)
    if scope is None:
        return STDIO_CLIENT, None
    return scope.get(CLIENT_KEY), scope.get(DISCONNECTED_KEY)


async def _cancel_on(event: Any, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _tool(limits: ServiceLimits) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Expected failures → `ToolError` (one line, scrubbed); anything else → one log line and an
    internal error naming only its log reference. Each call runs under `limits.call_seconds`
    and is cancelled when its HTTP client hangs up."""

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            owner, gone = _client_of(kwargs.get("ctx"))
            if owner is None:  # the HTTP front door authenticates every request: never here
                raise ToolError("not authenticated: send the server's bearer token")
            call = ToolCall(owner, limits, budget=Budget(limits.call_cpu_seconds))
            token = _CALL.set(call)
            try:
                stopped = "the client hung up: the call was stopped"
                outcome: list[Any] = []  # [result] or [None, exception]: kept out of the task group
                async with anyio.create_task_group() as tg:
                    if gone is not None:
                        tg.start_soon(_cancel_on, gone, tg.cancel_scope)
                    with anyio.move_on_after(limits.call_seconds):
                        try:
                            outcome.append(await fn(*args, **kwargs))
                        except (Exception, OverBudget) as exc:
                            outcome.extend((None, exc))
                        tg.cancel_scope.cancel()
                    if not outcome:
                        stopped = f"the call ran over its {limits.call_seconds:g} s of wall clock and was stopped"
                        tg.cancel_scope.cancel()
                if len(outcome) == 2:
                    raise outcome[1]
                if outcome:
                    return outcome[0]  # type: ignore[no-any-return]
                call.budget.cancel(stopped)
                raise ToolError(stopped)
            except ToolError as exc:
                raise ToolError(call.scrub(str(exc))) from None
            except OverBudget as exc:
                raise ToolError(call.scrub(f"{fn.__name__} stopped: {exc}")) from None
            except (HostError, SpecError, DataRefused) as exc:
                raise ToolError(call.scrub(str(exc))) from None
            except PoolBusy as exc:
                raise ToolError(call.scrub(str(exc))) from None
            except Exception as exc:  # a bug: never a traceback, never a detail at the client
                ref = secrets.token_hex(4)
                get_logger("kestrel.mcp").error("tool.internal_error", tool=fn.__name__, ref=ref, error=describe(exc))
                raise ToolError(f"internal error in {fn.__name__} (a bug in Kestrel; the server logged it as {ref})") from None
            finally:
                _CALL.reset(token)

        wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")  # the tool's description, unindented
        return wrapper

    return decorate


def _arguments_error(tool: str, exc: ValidationError) -> str:
    """A pydantic validation error of a tool's arguments as one line naming each argument."""
    parts = []
    for err in exc.errors()[:4]:
        name = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            parts.append(f"argument {name!r} is required")
            continue
        value = err.get("input")
        got = shown(value, 40) if isinstance(value, str) else cap_text(repr(value), 40)
        parts.append(f"argument {name!r}: {err['msg'].rstrip('.')} (got {got})")
    more = len(exc.errors()) - 4
    return f"Error executing tool {tool}: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _diagnostics(err: Any) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in err.diagnostics:
        item: Diagnostic = {"line": d.line, "col": d.column, "message": printable(d.message), "code": d.code}
        if d.hint:
            item["hint"] = printable(d.hint)
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


def _spec(roots: DataRoots, data: str, date: str | None, days: int, checkpoints: str | list[str] | None,
          **posture: Any) -> RunSpec:
    """The run a client asks for, its data confined to `roots` and its size bounded by the
    call's limits (before anything is loaded)."""
    call = current_call()
    lim = call.limits
    if not 1 <= days <= lim.max_days:
        raise ToolError(f"days must be 1 to {lim.max_days} on this server, got {cap_text(str(days), 20)}")
    points = _checkpoints(checkpoints)
    if len(points) > lim.max_checkpoints:
        raise ToolError(f"{len(points)} checkpoints: at most {lim.max_checkpoints} per day on this server")
    for key, cap in (("max_iterations", lim.max_iterations), ("token_budget", lim.max_token_budget)):
        value = posture.get(key)
        if value is not None and not 1 <= value <= cap:
            raise ToolError(f"{key} must be 1 to {cap:,} on this server, got {cap_text(str(value), 20)}")
    if date is not None and len(date) > 40:
        raise ToolError(f"date must be YYYY-MM-DD, got {shown(date, 40)}")
    name = roots.data_name(data)
    if posture.get("news") is not None:  # a news file is a data file: confined to the same roots
        posture["news"] = str(roots.confine(posture["news"]))
    head = data.strip().partition("|")[0]
    real = name.partition("|")[0]
    if real != head:
        call.written[real] = head
    try:
        return RunSpec(data=name, date=date, days=days, checkpoints=points, **posture)
    except (TypeError, msgspec.ValidationError) as exc:
        raise ToolError(str(exc)) from None


def _too_large(source: str) -> list[Diagnostic] | None:
    """The language's `too-large` diagnostic for a document over the length limit (checked
    before any processing: nothing of it is split, lexed or parsed)."""
    lim = current_call().limits.max_source_chars
    if len(source) <= lim:
        return None
    return [{"line": None, "col": None, "code": "too-large",
             "message": f"document is {len(source)} characters; the limit is {lim}",
             "hint": "split it, or keep one statement per reply"}]


def _source(text: str, what: str = "source") -> None:
    """Refuse a document over the length limit before any processing."""
    lim = current_call().limits.max_source_chars
    if len(text) > lim:
        raise ToolError(f"{what} is {len(text):,} characters; the limit is {lim:,}: send one statement")


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


def _render(run: Any, stmt: Any, resolved: Any, ordinal: Any, session: Any) -> ViewResult:
    """On a compute thread: the view's text on the snapshot frozen at its cutoff."""
    from kestrel.frame import freeze, materialize
    from kestrel.frame.text import estimate_tokens
    from kestrel.session.schedule import DEFAULT_GUARD_S

    at_ns = ordinal.time_ns
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


def _simulate(run: Any, agent: Any, budget: Budget) -> Summary:
    """On a compute thread: the fixed agent's run (`run_session`, the ledger of every backend),
    checking the budget at every ordinal and day."""
    from kestrel.session.runner import run_session

    result = run_session(run.data, Budgeted(agent, budget), run.options, date=run.date, days=run.days,
                         progress=lambda k, n: budget.check())
    budget.check()
    return _summary(result, run.data)


async def _holding(host: HostClient, owner: str, work: Awaitable[R], session_id: str | None = None) -> R:
    """`work` (a session's start or a reply): when the call is cancelled (its deadline, the
    client gone) before the session answers, the session is closed, so no work runs on for a
    caller who is not there."""
    try:
        return await work
    except BaseException as exc:
        if isinstance(exc, Exception):  # a refusal or an error: the session is as it was
            raise
        if session_id is not None:  # cancelled: the deadline passed or the client is gone
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await host.close(session_id, owner=owner)
                except HostError:
                    pass
        raise


def language_card() -> str:
    from kestrel.models.card import language_card as card

    return card()


class KestrelServer(MCPServer[Any]):
    """`MCPServer` whose unknown prompt is a protocol error naming it in both client modes
    (the SDK raises a ValueError there, which the modern dispatcher answers as an internal
    error), and whose argument errors are one line naming each bad argument."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_arguments_error(name, exc.__cause__)) from exc.__cause__
            raise

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:
        names = sorted(p.name for p in await self.list_prompts())
        if name not in names:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; the prompts are {', '.join(names)}")
        return await super().get_prompt(name, arguments, context)


def build_server(host: HostClient, *, agent_id: str = "mcp", roots: DataRoots | None = None,
                 limits: ServiceLimits | None = None) -> MCPServer[Any]:
    """The MCP server over `host`; `agent_id` is recorded in captures of client sessions;
    `roots` are the folders data files are read from (none: the sample only); `limits` bound
    every call (default: the host's)."""
    server: MCPServer[Any] = KestrelServer(
        "kestrel", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    roots = roots or DataRoots()
    lim = limits or host.limits
    tool = _tool(lim)

    def owner() -> str:
        return current_call().owner

    @server.tool()
    @tool
    async def check(source: str, ctx: Context) -> CheckResult:
        """Check a Kestrel document: valid or diagnostics (line, col, message, hint); the
        canonical text when valid."""
        from kestrel.lang import LangError, format_source

        too_large = _too_large(source)
        if too_large is not None:
            return {"valid": False, "diagnostics": too_large}
        try:
            canonical = format_source(source)
        except LangError as err:
            return {"valid": False, "diagnostics": _diagnostics(err)}
        return {"valid": True, "diagnostics": [], "canonical": canonical}

    @server.tool(name="format")
    @tool
    async def format_(source: str, ctx: Context) -> FormatResult:
        """The canonical text of a Kestrel document (or its diagnostics when invalid)."""
        from kestrel.lang import LangError, format_source

        too_large = _too_large(source)
        if too_large is not None:
            return {"valid": False, "diagnostics": too_large}
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
    @tool
    async def panes(ctx: Context) -> PanesResult:
        """The pane catalog: names, arguments with defaults and ranges, reserved kernel ids,
        the VIEW budget range."""
        return catalog()

    @server.tool()
    @tool
    async def view(view: str, at: str, ctx: Context, data: str = "sample", date: str | None = None,
                   news: str | None = None, blind: bool = False) -> ViewResult:
        """Render a VIEW (e.g. "VIEW v: quote, bars(5m, 12) BUDGET 600") on the snapshot
        frozen at `at` (hh:mm) minus the 5-minute guard, on session `date` (default: the
        data's last) of `data` ('sample' or a CSV/Parquet path under the server's data roots);
        `news`: a news file (under the same roots) for the news pane; `blind`: blind mode."""
        from kestrel.frame import ViewError, resolve_view
        from kestrel.frame.ordinal import AtError, view_ordinal
        from kestrel.lang import LangError, View, parse

        _source(view, "view")
        if len(at) > 16:
            raise ToolError(f"at must be hh:mm, got {shown(at, 16)}")
        try:
            stmt = parse(view)
        except LangError as err:
            raise ToolError(f"invalid VIEW: {err}") from None
        if not isinstance(stmt, View):
            raise ToolError(f"expected one VIEW statement, got {type(stmt).__name__}")
        run = await host.resolve(_spec(roots, data, date, 1, None, news=news, blind=blind))
        session = run.schedule[0].session
        try:  # the rule of `kestrel view --at`: a time from the open to the close
            ordinal = view_ordinal(session, at, flag="at", where="the session")
        except AtError as err:
            raise ToolError(str(err)) from None
        try:
            resolved = resolve_view(stmt, ordinal)
        except ViewError as err:
            raise ToolError(str(err)) from None
        call = current_call()
        return await host.compute.run(lambda b: _render(run, stmt, resolved, ordinal, session), call.budget)

    @server.tool()
    @tool
    async def simulate(plan: str, ctx: Context, data: str = "sample", date: str | None = None, days: Whole = 1,
                       checkpoints: str | list[str] | None = None, news: str | None = None,
                       blind: bool = False, symbols: str | list[str] | None = None, capital: float | None = None,
                       max_gross: float | None = None, max_open: Whole | None = None,
                       portfolio_maxloss: float | None = None, no_short: bool = False) -> AnySummary:
        """Arm `plan` at every session's OPEN and pass at the checkpoints (the fixed agent):
        returns exactly the `kestrel simulate --agent fixed:NAME.kes --json` summary, NAME
        being the plan's name. `blind`: blind mode, as `--blind` (the plan is written in the
        blind scale a blind `view` shows: its alias, prices rescaled to 100). A universe
        (`data` a long-format file with a symbol column, or any of `symbols`, `capital`,
        `max_gross`, `max_open`, `portfolio_maxloss`, `no_short`): `plan` is a module of plans
        each ON a symbol, on one account; returns the `--data UNIVERSE --json` document."""
        from kestrel.agents.fixed import FixedAgent, parse_plan
        from kestrel.engine.engine import Engine
        from kestrel.session.runner import engine_config

        _source(plan, "plan")
        call = current_call()
        wide = universe_spec(roots, call.limits, data, dict(symbols=symbols, capital=capital, max_gross=max_gross,
                             max_open=max_open, portfolio_maxloss=portfolio_maxloss, no_short=no_short),
                             date=date, days=days, checkpoints=_checkpoints(checkpoints), blind=blind, news=news)
        if wide is not None:
            universe = await host.resolve_universe(wide)
            check_module(plan, universe)
            return await host.compute.run(lambda b: simulate_universe_run(universe, plan, b), call.budget)
        try:
            agent = FixedAgent(plan, name=parse_plan(plan, "plan").name, source="plan")
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        run = await host.resolve(_spec(roots, data, date, days, checkpoints, news=news, blind=blind))
        first = run.schedule[0].session
        try:
            armed = agent.plan
            if run.options.blind:  # checked as the session arms it: mapped back to real values
                from kestrel.session.blind import blind_of

                armed = blind_of(run.data).plan_from_blind(armed, run.data.symbol)
            Engine(engine_config(run.options, run.data), first, run.data.symbol, run.data.tick_size).arm(armed)
        except ValueError as exc:
            raise ToolError(f"the engine refuses plan {agent.plan.name!r}: {exc}") from None
        done: Summary = await host.compute.run(lambda b: _simulate(run, agent, b), call.budget)
        return done  # type: ignore[return-value]

    @server.tool()
    @tool
    async def session_start(
        ctx: Context,
        data: str = "sample",
        date: str | None = None,
        days: Whole = 1,
        checkpoints: str | list[str] | None = None,
        profile: str | None = None,
        max_iterations: Whole | None = None,
        token_budget: Whole | None = None,
        effort: str | None = None,
        news: str | None = None,
        blind: bool = False,
        symbols: str | list[str] | None = None,
        capital: float | None = None,
        max_gross: float | None = None,
        max_open: Whole | None = None,
        portfolio_maxloss: float | None = None,
        no_short: bool = False,
    ) -> StartResult:
        """Start a session whose agent is YOU: returns the session id and the first request
        (a briefing). Answer each request with session_submit. `news`: a news file (JSON lines,
        CSV, Parquet) for the news pane; `blind`: blind mode (an alias, session numbers, prices
        rescaled so the first is 100, masked news; plans written in that scale). A universe
        (`data` a long-format file with a symbol column, or any of `symbols`, `capital`,
        `max_gross`, `max_open`, `portfolio_maxloss`, `no_short`): one account, each reply a
        module of plans each ON a symbol, STANDDOWN [ON SYM], PASS, or a VIEW of per-symbol
        panes (quote(SYM), bars(SYM, 1d, 20), watchlist, portfolio)."""
        posture: dict[str, Any] = dict(profile=profile, max_iterations=max_iterations, token_budget=token_budget,
                                       effort=effort)
        wide = universe_spec(roots, current_call().limits, data, dict(
            symbols=symbols, capital=capital, max_gross=max_gross, max_open=max_open,
            portfolio_maxloss=portfolio_maxloss, no_short=no_short), date=date, days=days,
            checkpoints=_checkpoints(checkpoints), blind=blind, news=news, **posture)
        run = await (host.resolve(_spec(roots, data, date, days, checkpoints, news=news, blind=blind, **posture))
                     if wide is None else host.resolve_universe(wide))
        me = owner()
        sid = await host.open(run, agent_id=agent_id, model="mcp-client", owner=me)
        out = _outcome(sid, await _holding(host, me, host.next_outcome(sid, 0, owner=me), sid))
        doc: StartResult = {"session_id": sid, "done": out["done"]}
        if "request" in out:
            doc["request"] = out["request"]
        if "summary" in out:
            doc["summary"] = out["summary"]
        return doc

    @server.tool()
    @tool
    async def session_submit(session_id: str, reply: str, ctx: Context, input_tokens: Whole | None = None,
                             output_tokens: Whole | None = None) -> SubmitResult:
        """Answer the session's waiting request with ONE statement (PLAN, VIEW, STANDDOWN or
        PASS). Returns the next request (same ordinal after a view or a repair, the next
        ordinal after a terminal turn) or done with the summary. Token counts you do not
        report are estimated from the request and reply text."""
        if len(reply) > lim.max_reply_chars:
            raise ToolError(
                f"reply of {len(reply)} characters is over the {lim.max_reply_chars} limit: "
                "answer with one statement"
            )
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if value is not None and not 0 <= value <= lim.max_tokens_per_call:
                got = value if abs(value) < 10**18 else "a larger number"
                raise ToolError(f"{name} must be 0 to {lim.max_tokens_per_call:_} (tokens of this call), got {got}")
        me = owner()
        outcome = await _holding(host, me, host.submit(session_id, reply, input_tokens, output_tokens, owner=me),
                                 session_id)
        return _outcome(session_id, outcome)

    @server.tool()
    @tool
    async def session_status(session_id: str, ctx: Context) -> StatusResult:
        """The session's state (waiting, running, done, failed), turns so far and the
        request waiting for a reply, if any."""
        s = await host.status(session_id, owner=owner())
        pending = None if s.pending is None else _request(RequestEvent(s.pending))
        return {
            "session_id": s.session_id, "state": s.state, "agent": s.agent, "data": s.data,
            "symbol": s.symbol, "dates": s.dates, "schedule": s.schedule, "turns": s.turns,
            "events": s.events, "request": pending, "reason": s.reason,
        }

    @server.tool()
    @tool
    async def session_result(session_id: str, ctx: Context) -> SessionResultDoc:
        """A finished session's summary, ledger and capture (the exact JSON-lines text
        `kestrel simulate --ledger/--capture` writes; the capture replays with
        `kestrel replay`)."""
        result = await host.any_result(session_id, owner=owner())
        if isinstance(result, PortfolioResult):  # the capture headed by its universe and news file
            capture = await host.universe_capture(session_id, owner=owner())
            return {"session_id": session_id, "summary": universe_summary(result),  # type: ignore[typeddict-item]
                    "ledger": result.ledger.to_jsonl().decode(), "capture": capture.decode()}
        data = await host.data.load((await host.status(session_id, owner=owner())).data)
        return {
            "session_id": session_id,
            "summary": _summary(result, data),  # type: ignore[typeddict-item]
            "ledger": result.ledger_jsonl().decode(),
            "capture": result.capture_jsonl().decode(),
        }

    @server.tool()
    @tool
    async def session_close(session_id: str, ctx: Context) -> CloseResult:
        """Forget a session (a running one stands down and stops first)."""
        closed = await host.close(session_id, owner=owner())
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
