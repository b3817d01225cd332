"""A sweep's statistics from its per-session records: per cell (agent x model x profile) the
mean, standard deviation and bootstrap interval of per-session net PnL and return on risk, the
Sharpe and Sortino of its whole return series, what it traded and spent; paired comparisons of
cells on the sessions both ran, Holm-adjusted across the grid, with a one-line verdict each; and
the deflated Sharpe ratio of the best cell given the cells tried.

Definitions (docs/report.md, "Statistics", is their one statement):
- a cell's value on a session is the mean over its repeats on that session; its series is those
  values in (data, date) order, so a data file's sessions are consecutive in time;
- mean and sd (ddof 1) are over sessions; the interval is the stationary bootstrap's
  (`kestrel.report.stats.bootstrap`) of that series' mean;
- Sharpe and Sortino are those of the pooled per-period returns of every record of the cell
  (`ReturnMoments.pooled`), annualized by sqrt(252 x the mean periods per session);
- a comparison of A with B pairs them on the sessions both ran, d_s = A_s - B_s; its interval is
  the stationary bootstrap's of mean(d), its p-value the two-sided Wilcoxon signed-rank test of d
  (scipy.stats.wilcoxon, zero differences dropped; 1 when every difference is 0), Holm-adjusted
  over every comparison of the grid that has a paired session;
- comparisons: each non-baseline cell against each baseline agent (its cell in the same profile,
  else its only cell) and against the best non-baseline cell (the top of the ranking);
- verdict: "beats" / "trails" when the Holm-adjusted p <= alpha and the interval excludes 0, else
  "no evidence of a difference"; fewer than `min_sessions` sessions add a warning.

Invariants: pure and deterministic; every random draw comes from a generator seeded by the
grid's seed and the names of what it resamples (never from the order of the records or the other
cells), so a cell's interval and a pair's interval do not change when another agent is added;
swapping a pair negates its difference and interval and keeps its p-value.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

import msgspec
import numpy as np
import numpy.typing as npt

from kestrel.report.metrics import TRADING_DAYS_PER_YEAR
from kestrel.report.stats.bootstrap import DRAWS, LEVEL, mean_interval
from kestrel.report.stats.moments import ReturnMoments
from kestrel.report.stats.paired import signed_rank_pvalues
from kestrel.report.stats.records import SessionRecord
from kestrel.report.stats.selection import deflated_sharpe, expected_max_sharpe, holm

F64 = npt.NDArray[np.float64]
DEFAULT_SEED = 0
ALPHA = 0.05
# below this many sessions the interval's coverage on skewed P&L falls under 93% (docs/report.md)
MIN_SESSIONS = 30
DEFAULT_BASELINES = ("buy-and-hold", "flat", "baseline", "equal-weight buy-and-hold", "cash")

Session = tuple[str, str]  # (data, date)


class StatsError(ValueError):
    """Records the statistics cannot be computed from (a duplicate, a non-finite value, a cell
    mixing currencies); the message says which and how to fix it."""


class CellKey(msgspec.Struct, frozen=True):
    agent: str
    profile: str
    model: str | None = None

    @property
    def label(self) -> str:
        """`agent (profile)`, with the model in brackets when the agent's name does not hold it."""
        model = f" [{self.model}]" if self.model and self.model not in self.agent else ""
        return f"{self.agent}{model} ({self.profile})"

    @property
    def words(self) -> str:
        return f"{self.agent}\x1e{self.model or ''}\x1e{self.profile}"


class Estimate(msgspec.Struct, frozen=True):
    """A per-session quantity of a cell over its sessions; sd and the interval None below two."""

    mean: float
    sd: float | None
    low: float | None
    high: float | None
    block_length: float | None
    sessions: int


class CellStats(msgspec.Struct, frozen=True):
    cell: CellKey
    rank: int
    baseline: bool
    sessions: int
    records: int
    repeats: int  # the most repeats of any of its sessions
    currency: str
    net_pnl: Estimate
    return_on_risk: Estimate
    repeat_sd: float | None  # pooled within-session sd of net PnL across repeats
    sharpe: float | None
    sortino: float | None
    periods_per_year: int
    periods: int  # distinct periods: per-session periods x sessions (repeats not counted)
    win_rate: float | None
    trades: int
    wins: int
    fees: float
    tokens: int | None
    cost_usd: float | None
    few_sessions: bool


Against = Literal["baseline", "best"]
Evidence = Literal["better", "worse", "none"]


class Comparison(msgspec.Struct, frozen=True):
    """A against B on the sessions both ran: the mean of d_s = A_s - B_s (net PnL per session)."""

    cell: CellKey
    other: CellKey
    against: Against
    sessions: int
    unpaired: int  # sessions only one of the two ran (left out)
    mean_difference: float | None
    low: float | None
    high: float | None
    block_length: float | None
    p_value: float | None
    p_holm: float | None
    evidence: Evidence
    verdict: str
    few_sessions: bool


class DeflatedSharpe(msgspec.Struct, frozen=True):
    """The best cell's deflated Sharpe ratio: P(true Sharpe > the expected best of `trials`
    unskilled trials), all in per-period Sharpe units except `sharpe` (annualized, as shown)."""

    cell: CellKey
    sharpe: float
    sharpe_per_period: float
    periods: int
    skewness: float
    kurtosis: float
    trials: int
    sharpe_variance: float
    expected_max: float
    probability: float | None


class GridStats(msgspec.Struct, frozen=True):
    cells: tuple[CellStats, ...]  # in rank order
    comparisons: tuple[Comparison, ...]
    deflated: DeflatedSharpe | None
    seed: int
    draws: int
    level: float
    alpha: float
    min_sessions: int


# ------------------------------------------------------------------------------------------
# seeding


def generator(seed: int, *words: str) -> np.random.Generator:
    """The generator for one resampled thing: seeded by the grid's `seed` and the SHA-256 of its
    name (`words`), so it depends on nothing else."""
    if seed < 0:
        raise StatsError(f"the seed must be a non-negative integer, got {seed}")
    digest = hashlib.sha256("\x1f".join(words).encode()).digest()
    key = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *key]))


# ------------------------------------------------------------------------------------------
# cells


class _Cell:
    """A cell's records by session, and its per-session (repeat-averaged) series."""

    def __init__(self, key: CellKey, records: list[SessionRecord]) -> None:
        self.key = key
        self.records = records
        by: dict[Session, list[SessionRecord]] = {}
        for r in records:
            by.setdefault(r.session, []).append(r)
        self.sessions = sorted(by)
        self.by = by
        self.net = np.array([math.fsum(r.net_pnl for r in by[s]) / len(by[s]) for s in self.sessions])
        self.ror = np.array([math.fsum(r.return_on_risk for r in by[s]) / len(by[s]) for s in self.sessions])
        self.index = {s: k for k, s in enumerate(self.sessions)}
        currencies = sorted({r.currency for r in records})
        if len(currencies) > 1:
            raise StatsError(f"{key.label} has sessions in {', '.join(currencies)}: its mean would add "
                             "different currencies; compute the statistics of each currency's data apart")
        self.currency = currencies[0]


def _cells(records: Iterable[SessionRecord]) -> list[_Cell]:
    groups: dict[CellKey, list[SessionRecord]] = {}
    seen: set[tuple[CellKey, str, str, int]] = set()
    for r in records:
        key = CellKey(r.agent, r.profile, r.model)
        for name, v in (("net_pnl", r.net_pnl), ("return_on_risk", r.return_on_risk)):
            if not math.isfinite(v):
                raise StatsError(f"{key.label} on {r.data} {r.date}: {name} is {v}; a session result must be a finite number")
        ident = (key, r.data, r.date, r.repeat)
        if ident in seen:
            raise StatsError(f"{key.label} has two records of {r.data} {r.date} repeat {r.repeat}: "
                             "each session and repeat must be recorded once (give repeats distinct numbers)")
        seen.add(ident)
        groups.setdefault(key, []).append(r)
    return [_Cell(k, groups[k]) for k in sorted(groups, key=lambda c: (c.agent, c.model or "", c.profile))]


def _summary(x: F64, seed: int, draws: int, level: float, *words: str) -> Estimate:
    n = int(x.shape[0])
    iv = mean_interval(x, generator(seed, *words), level=level, draws=draws)
    return Estimate(round(float(np.mean(x)), 9) if n else 0.0,
                   round(float(np.std(x, ddof=1)), 9) if n >= 2 else None,
                   None if iv is None else round(iv.low, 9), None if iv is None else round(iv.high, 9),
                   None if iv is None else iv.block_length, n)


def _repeat_sd(c: _Cell) -> float | None:
    num = 0.0
    den = 0
    for rs in c.by.values():
        if len(rs) > 1:
            mean = math.fsum(r.net_pnl for r in rs) / len(rs)
            num += math.fsum((r.net_pnl - mean) ** 2 for r in rs)
            den += len(rs) - 1
    return round(math.sqrt(num / den), 9) if den else None


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _cell_stats(c: _Cell, rank: int, baseline: bool, seed: int, draws: int, level: float,
                min_sessions: int) -> tuple[CellStats, ReturnMoments]:
    rs = c.records
    moments = ReturnMoments.pooled([r.returns for r in rs])
    per_session = max(1, round(moments.count / len(rs))) if moments.count else 1
    ppy = TRADING_DAYS_PER_YEAR * per_session
    trades = sum(r.trades for r in rs)
    wins = sum(r.wins for r in rs)
    tokens = [r.tokens for r in rs]
    costs = [r.cost_usd for r in rs]
    n = len(c.sessions)
    stats = CellStats(
        cell=c.key, rank=rank, baseline=baseline, sessions=n, records=len(rs),
        repeats=max(len(v) for v in c.by.values()), currency=c.currency,
        net_pnl=_summary(c.net, seed, draws, level, "cell", "net_pnl", c.key.words),
        return_on_risk=_summary(c.ror, seed, draws, level, "cell", "return_on_risk", c.key.words),
        repeat_sd=_repeat_sd(c), sharpe=_round(moments.sharpe(ppy)), sortino=_round(moments.sortino(ppy)),
        periods_per_year=ppy, periods=round(moments.count * n / len(rs)),
        win_rate=round(wins / trades, 6) if trades else None, trades=trades, wins=wins,
        fees=round(sum((r.fees for r in rs), 0.0), 9),
        tokens=None if any(t is None for t in tokens) else sum(t for t in tokens if t is not None),
        cost_usd=None if any(x is None for x in costs) else round(sum(x for x in costs if x is not None), 9),
        few_sessions=n < min_sessions)
    return stats, moments


# ------------------------------------------------------------------------------------------
# comparisons


def _p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _sessions_text(n: int) -> str:
    return f"{n} paired session{'s' if n != 1 else ''}"


def verdict(c: Comparison, min_sessions: int = MIN_SESSIONS) -> str:
    """The comparison in one line: "A beats B by +12.30 [+3.10, +20.50] per session, p = 0.01,
    40 paired sessions", "A trails B by ...", or "A vs B: no evidence of a difference (...)"."""
    a, b = c.cell.label, c.other.label
    if c.sessions == 0 or c.mean_difference is None:
        return f"{a} vs {b}: no paired sessions"
    iv = "" if c.low is None or c.high is None else f" [{c.low:+.2f}, {c.high:+.2f}]"
    p = c.p_holm if c.p_holm is not None else c.p_value
    tail = f"{c.mean_difference:+.2f}{iv} per session, {_p_text(p if p is not None else 1.0)}, {_sessions_text(c.sessions)}"
    if c.evidence == "better":
        line = f"{a} beats {b} by {tail}"
    elif c.evidence == "worse":
        line = f"{a} trails {b} by {tail}"
    else:
        line = f"{a} vs {b}: no evidence of a difference ({tail})"
    if c.sessions < min_sessions:
        line += f"; fewer than {min_sessions} paired sessions: the interval means little"
    return line


def _evidence(low: float | None, high: float | None, p: float | None, alpha: float) -> Evidence:
    if low is None or high is None or p is None or p > alpha:
        return "none"
    return "better" if low > 0 else "worse" if high < 0 else "none"


def _pair(a: _Cell, b: _Cell, against: Against, seed: int, draws: int, level: float) -> tuple[Comparison, F64 | None]:
    """The comparison without its p-value, and the paired differences (None without any)."""
    common = [s for s in a.sessions if s in b.index]
    unpaired = len(a.sessions) + len(b.sessions) - 2 * len(common)
    if common and a.currency != b.currency:
        raise StatsError(f"{a.key.label} ({a.currency}) and {b.key.label} ({b.currency}) ran the same sessions "
                         "in different currencies: the records disagree about the data")
    if not common:
        return Comparison(a.key, b.key, against, 0, unpaired, None, None, None, None, None, None, "none", "",
                          True), None
    d = a.net[[a.index[s] for s in common]] - b.net[[b.index[s] for s in common]]
    pair = sorted([a.key.words, b.key.words])  # one draw for (A, B) and (B, A)
    iv = mean_interval(d, generator(seed, "pair", *pair), level=level, draws=draws)
    return Comparison(a.key, b.key, against, len(common), unpaired, round(float(np.mean(d)), 9),
                      None if iv is None else round(iv.low, 9), None if iv is None else round(iv.high, 9),
                      None if iv is None else iv.block_length, None, None, "none", "", False), d


def _finish(pairs: Sequence[tuple[Comparison, F64 | None]], alpha: float, min_sessions: int) -> list[Comparison]:
    """p-values, Holm over the comparisons with a paired session, then evidence and verdicts."""
    tested = [k for k, (_, d) in enumerate(pairs) if d is not None]
    raw = signed_rank_pvalues([d for _, d in pairs if d is not None])
    adjusted = holm(raw)
    p_raw = {k: round(p, 12) for k, p in zip(tested, raw)}
    p_holm = {k: round(p, 12) for k, p in zip(tested, adjusted)}
    out: list[Comparison] = []
    for k, (c, _) in enumerate(pairs):
        ph = p_holm.get(k)
        c = msgspec.structs.replace(c, p_value=p_raw.get(k), p_holm=ph, evidence=_evidence(c.low, c.high, ph, alpha),
                                    few_sessions=c.sessions < min_sessions)
        out.append(msgspec.structs.replace(c, verdict=verdict(c, min_sessions)))
    return out


def compare(records: Iterable[SessionRecord], cell: CellKey, other: CellKey, *, seed: int = DEFAULT_SEED,
            draws: int = DRAWS, level: float = LEVEL, alpha: float = ALPHA,
            min_sessions: int = MIN_SESSIONS, against: Against = "baseline") -> Comparison:
    """One paired comparison on its own (a family of one: its Holm p is its p-value)."""
    cells = {c.key: c for c in _cells(records)}
    for k in (cell, other):
        if k not in cells:
            raise StatsError(f"no records of {k.label}")
    return _finish([_pair(cells[cell], cells[other], against, seed, draws, level)], alpha, min_sessions)[0]


def _baseline_cell(name: str, profile: str, by_agent: dict[str, list[_Cell]]) -> _Cell | None:
    cs = by_agent.get(name, [])
    same = [c for c in cs if c.key.profile == profile]
    if len(same) == 1:
        return same[0]
    return cs[0] if len(cs) == 1 else None


# ------------------------------------------------------------------------------------------
# the grid


def _deflated(agents: Sequence[tuple[CellStats, ReturnMoments]], trials: int | None) -> DeflatedSharpe | None:
    tried = [(s, m, m.mean / sd) for s, m in agents if (sd := m.sd) is not None and sd > 0]
    if not tried:
        return None
    best, moments, sr = max(tried, key=lambda t: (t[2], -t[0].rank))
    srs = np.array([t[2] for t in tried])
    n = max(len(tried), trials or 0)
    var = float(np.var(srs, ddof=1)) if len(tried) >= 2 else 0.0
    skew, kurt = moments.skewness, moments.kurtosis
    if skew is None or kurt is None or best.sharpe is None:
        return None
    return DeflatedSharpe(best.cell, best.sharpe, round(sr, 9), best.periods, round(skew, 6), round(kurt, 6), n,
                          round(var, 12), round(expected_max_sharpe(n, var), 9),
                          _round(deflated_sharpe(sr, best.periods, skew, kurt, trials=n, sharpe_variance=var)))


def grid_stats(records: Iterable[SessionRecord], *, baselines: Collection[str] = DEFAULT_BASELINES,
               seed: int = DEFAULT_SEED, draws: int = DRAWS, level: float = LEVEL, alpha: float = ALPHA,
               min_sessions: int = MIN_SESSIONS, trials: int | None = None) -> GridStats:
    """Every statistic of a sweep (see the module docstring). `baselines` names the agents that
    are references, not contenders (compared against, never ranked as the best, not counted as
    trials); `trials` raises the number of trials the deflated Sharpe assumes (e.g. cells tried
    outside this sweep), never below the cells it has."""
    if draws < 100:
        raise StatsError(f"draws must be at least 100 for a {level:.0%} percentile interval, got {draws}")
    if not 0 < level < 1 or not 0 < alpha < 1:
        raise StatsError(f"level and alpha must lie strictly between 0 and 1, got {level} and {alpha}")
    cells = _cells(records)
    order = sorted(cells, key=lambda c: (-float(np.mean(c.net)), c.key.agent in baselines,
                                         c.key.agent, c.key.model or "", c.key.profile))
    computed = [_cell_stats(c, k, c.key.agent in baselines, seed, draws, level, min_sessions)
                for k, c in enumerate(order, 1)]
    agents = [c for c in order if c.key.agent not in baselines]
    by_agent: dict[str, list[_Cell]] = {}
    for c in order:
        if c.key.agent in baselines:
            by_agent.setdefault(c.key.agent, []).append(c)
    pairs: list[tuple[Comparison, F64 | None]] = []
    for a in agents:
        for name in sorted(by_agent):
            b = _baseline_cell(name, a.key.profile, by_agent)
            if b is not None:
                pairs.append(_pair(a, b, "baseline", seed, draws, level))
    for a in agents[1:]:
        pairs.append(_pair(a, agents[0], "best", seed, draws, level))
    return GridStats(tuple(s for s, _ in computed), tuple(_finish(pairs, alpha, min_sessions)),
                     _deflated([(s, m) for s, m in computed if not s.baseline], trials),
                     seed, draws, level, alpha, min_sessions)


__all__ = ["ALPHA", "DEFAULT_BASELINES", "DEFAULT_SEED", "MIN_SESSIONS", "CellKey", "CellStats", "Comparison",
           "DeflatedSharpe", "GridStats", "StatsError", "Estimate", "compare", "generator", "grid_stats", "verdict"]
