"""The session host: one actor owning many sessions at once, each a driver + engine + agent.

An agent may be in process (baseline, fixed, a model adapter) or external: its replies
arrive as messages (`HostClient.submit`), which is how an MCP client or a daemon client is
the agent of a session. Every session emits an ordered stream of events (requests, evidence,
terminal turns, ledger events, the end of the run) that transports follow and stores commit.
A session runs one symbol (`ResolvedRun`) or a universe on one account (`UniverseRun`,
`kestrel.service.host.universe`). See docs/mcp.md.
"""

from kestrel.service.host.client import DataCache, HostClient, HostError, Outcome, Started, open_host
from kestrel.service.host.events import (
    BudgetLeft,
    EvidenceEvent,
    HostedRequest,
    LedgerEvents,
    PortfolioLedgerLines,
    PortfolioTurnEvent,
    RequestEvent,
    RunEnded,
    SessionEvent,
    TurnEvent,
)
from kestrel.service.host.host import DEFAULT_ABANDON_AFTER_S, Observer, SessionHost, SessionStatus
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits
from kestrel.service.host.pool import Budget, OverBudget, PoolBusy, WorkPool
from kestrel.service.host.roots import DataRefused, DataRoots
from kestrel.service.host.port import PortRefused, ReplyPort
from kestrel.service.host.run import ExternalAgent, run_hosted
from kestrel.service.host.universe import (
    UniverseRun,
    UniverseSpec,
    is_universe_name,
    resolve_universe,
    run_hosted_universe,
    universe_capture,
    universe_summary,
)

__all__ = [
    "DEFAULT_ABANDON_AFTER_S",
    "DEFAULT_LIMITS",
    "Budget",
    "DataRefused",
    "DataRoots",
    "OverBudget",
    "PoolBusy",
    "ServiceLimits",
    "WorkPool",
    "BudgetLeft",
    "DataCache",
    "EvidenceEvent",
    "ExternalAgent",
    "HostClient",
    "HostError",
    "HostedRequest",
    "LedgerEvents",
    "PortfolioLedgerLines",
    "PortfolioTurnEvent",
    "UniverseRun",
    "UniverseSpec",
    "is_universe_name",
    "resolve_universe",
    "run_hosted_universe",
    "universe_capture",
    "universe_summary",
    "Observer",
    "Outcome",
    "PortRefused",
    "ReplyPort",
    "RequestEvent",
    "RunEnded",
    "SessionEvent",
    "SessionHost",
    "SessionStatus",
    "Started",
    "TurnEvent",
    "open_host",
    "run_hosted",
]
