"""The MCP tools' structured results, as TypedDicts (the SDK derives each tool's outputSchema
from its return annotation; a msgspec Struct would get none). `typing_extensions.TypedDict`
so pydantic can read nested ones on Python 3.11."""

from typing import Any

from pydantic import ConfigDict, with_config
from typing_extensions import NotRequired, TypedDict

_OPEN = ConfigDict(extra="allow")
"""For mirrors of records defined elsewhere (the `--json` summary): a key added there passes
through instead of being dropped by the output validation."""


class Diagnostic(TypedDict):
    line: int | None
    col: int | None
    message: str
    code: str
    hint: NotRequired[str]


class CheckResult(TypedDict):
    valid: bool
    diagnostics: list[Diagnostic]
    canonical: NotRequired[str]


class FormatResult(TypedDict):
    valid: bool
    diagnostics: list[Diagnostic]
    text: NotRequired[str]


class PaneArgInfo(TypedDict):
    name: str
    type: str
    default: str
    range: str
    help: str


class Pane(TypedDict):
    name: str
    description: str
    signature: str
    args: list[PaneArgInfo]


class ViewBudget(TypedDict):
    default: int
    min: int
    max: int


class PanesResult(TypedDict):
    panes: list[Pane]
    kernel_ids: list[str]
    budget: ViewBudget


class ViewResult(TypedDict):
    text: str
    tokens: int
    panes: list[str]
    budget: int
    date: str
    cutoff: str


Number = int | float
"""A count stays an int and an amount a float, exactly as `--json` has them (pydantic's smart
union keeps each value's own type; a bare `float` would turn `2` into `2.0`)."""


class TurnSummary(TypedDict):
    ordinal: str
    turn: str
    armed: str
    iterations: int
    tokens: int
    escalations: int


@with_config(_OPEN)
class DaySummary(TypedDict):
    date: str
    partial: bool
    coverage: str
    currency: str
    turns: list[TurnSummary]
    trades: int
    wins: int
    realized_pnl: Number
    fees: Number
    net_pnl: Number
    max_drawdown: Number
    orders: int
    fills: int
    engine_ticks: dict[str, int]


@with_config(_OPEN)
class TotalSummary(TypedDict):
    """The run's totals: counts are integers, money floats, as in `--json`."""

    fills: int
    orders: int
    trades: int
    wins: int
    net_pnl: float
    unrealized_pnl: float


@with_config(_OPEN)
class Summary(TypedDict):
    """Exactly the `kestrel simulate --json` summary."""

    data: str
    symbol: str
    currency: str | list[str]
    agent: str
    dates: list[str]
    schedule: list[str]
    engine_path: str
    engine_ticks: dict[str, int]
    days: list[DaySummary]
    total: TotalSummary
    evidence: dict[str, int]


@with_config(_OPEN)
class AnySummary(TypedDict, total=False):
    """A single-symbol run's `Summary`, or a universe run's: exactly the `kestrel simulate
    --data UNIVERSE --json` document (the portfolio report: figures, per-symbol attribution,
    per-session lines, baselines, the account check; and the run's dates, end cash, equity,
    holdings and turns). One object schema: a union would be wrapped in a `result` key."""

    data: str
    symbol: str
    currency: str | list[str]
    agent: str
    dates: list[str]
    schedule: list[str]
    engine_path: str
    engine_ticks: dict[str, int]
    days: list[DaySummary]
    total: TotalSummary
    evidence: dict[str, int]
    symbols: list[str]
    capital: Number
    sessions: int
    fills: int
    rejections: int
    metrics: dict[str, Any]
    attribution: list[dict[str, Any]]
    per_session: list[dict[str, Any]]
    baselines: dict[str, Any]
    account_check: dict[str, Any]
    cash: Number
    equity: Number
    open_positions: int
    holdings: list[dict[str, Any]]
    turns: list[dict[str, Any]]


class BudgetLeft(TypedDict):
    iterations: int
    tokens: int


class AgentRequestInfo(TypedDict):
    """What the session asks its agent: answer with ONE statement via session_submit."""

    date: str
    ordinal: str
    iteration: int
    briefing: str
    repair_error: str | None
    view_name: str | None
    budget_left: BudgetLeft | None


class StartResult(TypedDict):
    session_id: str
    done: bool
    request: NotRequired[AgentRequestInfo]
    summary: NotRequired[AnySummary]


class SubmitResult(TypedDict):
    session_id: str
    done: bool
    request: NotRequired[AgentRequestInfo]
    summary: NotRequired[AnySummary]
    state: NotRequired[str]
    reason: NotRequired[str]


class StatusResult(TypedDict):
    session_id: str
    state: str
    agent: str
    data: str
    symbol: str
    dates: list[str]
    schedule: list[str]
    turns: int
    events: int
    request: AgentRequestInfo | None
    reason: str | None


class SessionResultDoc(TypedDict):
    session_id: str
    summary: AnySummary
    ledger: str
    capture: str


class CloseResult(TypedDict):
    session_id: str
    closed: bool
    state: str


def plain(value: Any) -> Any:
    """A msgspec Struct (or anything msgspec encodes) as JSON-compatible builtins."""
    import msgspec

    return msgspec.to_builtins(value)


__all__ = [
    "AnySummary",
    "BudgetLeft",
    "CheckResult",
    "CloseResult",
    "DaySummary",
    "TotalSummary",
    "Diagnostic",
    "FormatResult",
    "Number",
    "Pane",
    "PaneArgInfo",
    "PanesResult",
    "AgentRequestInfo",
    "SessionResultDoc",
    "StartResult",
    "StatusResult",
    "SubmitResult",
    "Summary",
    "TurnSummary",
    "ViewBudget",
    "ViewResult",
    "plain",
]
