"""The MCP tools over a universe: `simulate` and the client-session tools when the data is a
long-format file (a `symbol` column) or any portfolio argument is given (`symbols`, `capital`,
`max_gross`, `max_open`, `portfolio_maxloss`, `no_short`).

A universe request is checked here against the call's limits and the server's data roots
(the file confined exactly as a single-symbol one; a folder or a glob is refused: a server
reads one file per name) and becomes a `UniverseSpec`; every refusal is one line naming the
fix; `blind` and `news` (a file under the same roots) run as `--blind` and `--news`. `simulate`
of a universe arms the plans (a module, each plan `ON` its symbol: its alias in blind mode, its
prices on the blind scale) at every session's OPEN and returns the document `kestrel simulate
--data UNIVERSE --json` prints; a client session over a universe asks the client for each turn (a module of `ON SYM` plans,
`STANDDOWN [ON SYM]`, `PASS` or a VIEW of per-symbol panes such as `quote(AAPL)`, `watchlist`
and `portfolio`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from mcp.server.mcpserver.exceptions import ToolError

from kestrel.service.host import DataRoots, ServiceLimits, UniverseSpec, is_universe_name
from kestrel.service.host.limits import cap_text
from kestrel.service.host.pool import Budget
from kestrel.service.host.universe import UniverseRun
from kestrel.service.mcp.schema import AnySummary
from kestrel.session.portfolio import PortfolioResult

PORTFOLIO_ARGUMENTS = ("symbols", "capital", "max_gross", "max_open", "portfolio_maxloss", "no_short")


class Budgeted:
    """An agent checking the call's budget at every ordinal (`OverBudget` stops the run)."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, inner: Any, budget: Budget) -> None:
        self._inner = inner
        self._budget = budget

    @property
    def agent_id(self) -> str:
        return str(self._inner.agent_id)

    @property
    def model(self) -> str:
        return str(self._inner.model)

    def author(self, request: Any) -> Any:
        self._budget.check()
        return self._inner.author(request)


def _symbols(value: str | list[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    return tuple(s.strip() for s in items if s.strip())


def universe_spec(roots: DataRoots, limits: ServiceLimits, data: str, portfolio: dict[str, Any],
                  *, date: str | None, days: int, checkpoints: tuple[str, ...], blind: bool = False,
                  news: str | None = None, **posture: Any) -> UniverseSpec | None:
    """The universe run a call asks for, or None when it asks for one symbol (see the module
    docstring). `portfolio` holds the portfolio arguments by name (None: not given)."""
    given = {k: v for k, v in portfolio.items() if v is not None and v is not False}
    name = roots.data_name(data)
    real = name.partition("|")[0]
    if not given and not is_universe_name(real, name):
        return None
    if real == "sample":
        raise ToolError(f"{', '.join(given)}: 'sample' is one symbol; give a long-format file (a symbol column) "
                        "under the server's data roots to trade a universe")
    if "|" in name:
        raise ToolError("a universe takes no data options (symbol=, preset=, crossed=): name the file alone and "
                        "choose members with symbols")
    if not 1 <= days <= limits.max_days:
        raise ToolError(f"days must be 1 to {limits.max_days} on this server, got {cap_text(str(days), 20)}")
    if len(checkpoints) > limits.max_checkpoints:
        raise ToolError(f"{len(checkpoints)} checkpoints: at most {limits.max_checkpoints} per day on this server")
    for key, cap in (("max_iterations", limits.max_iterations), ("token_budget", limits.max_token_budget)):
        value = posture.get(key)
        if value is not None and not 1 <= value <= cap:
            raise ToolError(f"{key} must be 1 to {cap:,} on this server, got {cap_text(str(value), 20)}")
    fields = {k: v for k, v in given.items() if k != "symbols"}
    if news is not None:  # a news file is a data file: confined to the same roots as one symbol's
        fields["news"] = str(roots.confine(news))
    if blind:
        fields["blind"] = True
    try:
        return UniverseSpec(data=real, symbols=_symbols(portfolio.get("symbols")), date=date, days=days,
                            checkpoints=checkpoints, **fields, **{k: v for k, v in posture.items() if v is not None})
    except (TypeError, ValueError) as exc:
        raise ToolError(str(exc)) from None


def check_module(plan: str, run: UniverseRun) -> None:
    """Refuse a plan text that is not a turn of the universe (one line naming the fix)."""
    from kestrel.session.portfolio import read_turn, universe_configs

    blind = run.blind  # blind: the plans are written ON the aliases
    real = run.universe.symbols if blind is None else blind.shown_order(run.universe.symbols)
    shown = real if blind is None else [blind.alias(s) for s in real]
    cfgs = universe_configs(run.universe, run.options)
    lots = {w: float(cfgs[r].lot_size) for r, w in zip(real, shown)}
    turn = read_turn(plan, shown, lots)
    if isinstance(turn, str):
        raise ToolError(" ".join(turn.split()))
    if not turn.plans:
        raise ToolError("simulate arms plans: give PLANs, each ON a symbol of the universe "
                        f"({', '.join(shown[:8])}{', ...' if len(shown) > 8 else ''})")


def simulate_universe_run(run: UniverseRun, plan: str, budget: Budget) -> AnySummary:
    """On a compute thread: the plans armed at every OPEN (`run_portfolio`, the ledger of every
    backend), checking the budget at every ordinal; the `--json` document."""
    from kestrel.service.host import universe_summary
    from kestrel.session.portfolio import ModuleAgent, run_portfolio
    from kestrel.session.options import SessionError

    agent = Budgeted(ModuleAgent(plan, "plan"), budget)
    try:
        result: PortfolioResult = run_portfolio(run.universe, agent, run.bounds, run.options, date=run.date,
                                                days=run.spec.days, news_sha256=run.news_sha256)
    except SessionError as exc:
        raise ToolError(str(exc)) from None
    budget.check()
    doc: AnySummary = universe_summary(result)  # type: ignore[assignment]
    return doc


__all__ = ["PORTFOLIO_ARGUMENTS", "Budgeted", "check_module", "simulate_universe_run", "universe_spec"]
