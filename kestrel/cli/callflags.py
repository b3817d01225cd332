"""The flags of how a run's model calls are made, shared by `kestrel simulate` (and through it
`kestrel ctl submit`) and `kestrel sweep`: spending caps, the reply cache, the leakage check.

- `--max-usd X`, `--max-tokens N`: the run's spending caps (a sweep's are its own total; its
  runs' are `--run-max-usd`, `--run-max-tokens`): before each call its worst case must fit what
  is left, else the ordinal stands down with "spending cap" and no request is sent;
- `--reply-cache DIR`: replay recorded replies for identical requests (no call, nothing spent)
  and record new ones, in `DIR/replies.sqlite3`; never used unless given;
- `--rpm N|PROVIDER=N`, `--tpm N|PROVIDER=N`: the client-side rate limit kept per endpoint
  (requests, tokens per minute), over an agent spec's `|rpm=`/`|tpm=` and the provider row's
  `rpm`/`tpm` (kestrel/providers/providers.toml); `PROVIDER=N` over a plain `N`;
- `--require-post-cutoff`: refuse a run whose data may be in its model's training data (or
  whose model's cutoff is unknown), per `kestrel/models/cutoffs.toml`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from kestrel.cli.errors import UsageError

if TYPE_CHECKING:
    from kestrel.models.callpolicy import CallPolicy
    from kestrel.models.replycache import ReplyCache
    from kestrel.models.spending import SpendingBudget


def usd(text: str) -> float:
    """A dollar amount > 0 (argparse type)."""
    try:
        x = float(text.strip().removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a dollar amount: {text!r} (e.g. 2.50)") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return x


def tokens(text: str) -> int:
    """A token count >= 1 (argparse type)."""
    try:
        n = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of tokens: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return n


def add_call_flags(p: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    g = p.add_argument_group("model calls: spending caps, reply cache, leakage")
    whose = "the sweep's total" if sweep else "the run's"
    g.add_argument("--max-usd", type=usd, metavar="X",
                   help=f"{whose} spending cap in dollars: a call whose worst case does not fit what is left is "
                        "not made (the ordinal stands down: spending cap)")
    g.add_argument("--max-tokens", type=tokens, metavar="N", help=f"{whose} cap in tokens (input + output + thinking)")
    if sweep:
        g.add_argument("--run-max-usd", type=usd, metavar="X", help="each run's own spending cap in dollars")
        g.add_argument("--run-max-tokens", type=tokens, metavar="N", help="each run's own cap in tokens")
    g.add_argument("--reply-cache", metavar="DIR",
                   help="replay the recorded reply of an identical request (no call, nothing spent: marked cached) "
                        "and record new ones in DIR/replies.sqlite3; off unless given")
    g.add_argument("--rpm", action="append", metavar="N|PROVIDER=N",
                   help="the client-side limit of requests per minute to each endpoint (of PROVIDER), over an agent's "
                        "rpm= and the provider table's rpm")
    g.add_argument("--tpm", action="append", metavar="N|PROVIDER=N",
                   help="the client-side limit of tokens per minute to each endpoint (of PROVIDER), over an agent's "
                        "tpm= and the provider table's tpm")
    g.add_argument("--require-post-cutoff", action="store_true",
                   help="refuse a run on data from before its model's training cutoff, or whose cutoff is unknown "
                        "(kestrel/models/cutoffs.toml)")


def budget(max_usd: float | None, max_tokens: int | None, name: str) -> SpendingBudget | None:
    from kestrel.models.spending import SpendingBudget, SpendingCap

    if max_usd is None and max_tokens is None:
        return None
    return SpendingBudget(SpendingCap(max_usd=max_usd, max_tokens=max_tokens), name=name)


def reply_cache(directory: str | None) -> ReplyCache | None:
    from kestrel.models.replycache import ReplyCache

    if directory is None:
        return None
    try:
        return ReplyCache(directory)
    except ValueError as exc:
        raise UsageError(f"--reply-cache {directory}: {exc}") from None


def run_policy(args: argparse.Namespace) -> CallPolicy | None:
    """A single run's call policy from its flags (None: the defaults)."""
    from kestrel.models.callpolicy import CallPolicy

    run = budget(getattr(args, "max_usd", None), getattr(args, "max_tokens", None), "run")
    cache = reply_cache(getattr(args, "reply_cache", None))
    if run is None and cache is None:
        return None
    return CallPolicy(budgets=() if run is None else (run,), cache=cache)


def concurrency_limits(values: Sequence[str]) -> tuple[int | None, dict[str, int]]:
    """`--max-concurrency N` and `PROVIDER=N` items (comma-separated or repeated): the N and
    {provider: N} (`UsageError` naming a bad item)."""
    from kestrel.providers import lookup, names

    window: int | None = None
    per: dict[str, int] = {}
    for item in (x.strip() for v in values for x in v.split(",") if x.strip()):
        name, eq, n = item.rpartition("=") if "=" in item else ("", "", item)
        try:
            k = int(n)
        except ValueError:
            k = 0
        if k < 1:
            raise UsageError(f"--max-concurrency {item!r}: give N or PROVIDER=N with N >= 1")
        if not eq:
            window = k
        elif lookup(name) is None:
            raise UsageError(f"--max-concurrency {item!r}: unknown provider {name!r}: use one of {', '.join(names())}")
        else:
            per[name.strip().lower()] = k
    return window, per


class RateFlags(NamedTuple):
    """`--rpm` and `--tpm`: provider -> per minute ("" for a plain N: every provider)."""

    rpm: dict[str, float]
    tpm: dict[str, float]

    def of(self, provider: str) -> tuple[float | None, float | None]:
        """(rpm, tpm) the flags give `provider` (`PROVIDER=N` over a plain N; None: no flag)."""
        return (self.rpm.get(provider, self.rpm.get("")), self.tpm.get(provider, self.tpm.get("")))


def _per_minute(flag: str, values: Sequence[str]) -> dict[str, float]:
    from kestrel.providers import lookup, names

    out: dict[str, float] = {}
    for item in (x.strip() for v in values for x in v.split(",") if x.strip()):
        name, eq, n = item.rpartition("=") if "=" in item else ("", "", item)
        try:
            x = float(n)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and 0 < x <= 1e12):
            raise UsageError(f"{flag} {item!r}: give N or PROVIDER=N, N > 0 per minute")
        if eq and lookup(name) is None:
            raise UsageError(f"{flag} {item!r}: unknown provider {name!r}: use one of {', '.join(names())}")
        out[name.strip().lower()] = x
    return out


def rate_flags(args: argparse.Namespace) -> RateFlags:
    """`--rpm`, `--tpm` from the parsed flags (`UsageError` naming a bad item)."""
    return RateFlags(_per_minute("--rpm", getattr(args, "rpm", None) or ()),
                     _per_minute("--tpm", getattr(args, "tpm", None) or ()))


def endpoint_rate(provider: str, rpm: float | None, tpm: float | None,
                  flags: RateFlags | None = None) -> tuple[float | None, float | None]:
    """The (rpm, tpm) kept for an endpoint of `provider`, each on its own: the flag's, else the
    agent spec's (`rpm`, `tpm`), else the provider row's, else None (not kept)."""
    from kestrel.providers import lookup

    row = lookup(provider)
    flag_rpm, flag_tpm = flags.of(provider) if flags is not None else (None, None)
    return (flag_rpm if flag_rpm is not None else rpm if rpm is not None else row.rpm if row is not None else None,
            flag_tpm if flag_tpm is not None else tpm if tpm is not None else row.tpm if row is not None else None)


def apply_rate_flags(agent: Any, flags: RateFlags) -> None:
    """Give a model agent (other agents pass) the limiter `flags` name for its provider, the
    values they leave unset kept from its own."""
    from dataclasses import replace

    from kestrel.models.adapter import ModelAgent
    from kestrel.models.limiter import RateLimit, RateLimiter

    if not isinstance(agent, ModelAgent):
        return
    flag_rpm, flag_tpm = flags.of(agent.config.provider)
    if flag_rpm is None and flag_tpm is None:
        return
    policy = agent.policy
    own = policy.limiter.limit if policy.limiter is not None else RateLimit()
    limit = RateLimit(requests_per_minute=flag_rpm if flag_rpm is not None else own.requests_per_minute,
                      tokens_per_minute=flag_tpm if flag_tpm is not None else own.tokens_per_minute,
                      burst_s=own.burst_s)
    agent.policy = replace(policy, limiter=RateLimiter(limit, clock=policy.clock))


def arm_latency(text: str | None) -> float | Literal["measured"] | None:
    """`--arm-latency measured|SECONDS` (None: off; `UsageError` naming the choices)."""
    if text is None:
        return None
    if text.strip().lower() == "measured":
        return "measured"
    try:
        x = float(text.strip().removesuffix("s"))
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and 0 <= x <= 86_400):
        raise UsageError(f"--arm-latency {text!r}: give measured or seconds from 0 to 86400 (e.g. 12.5)")
    return x


def parse_usd_rates(values: Sequence[str]) -> dict[str, float]:
    """`--usd-rate CUR=RATE` values as {CUR: dollars per unit} (`UsageError` naming a bad one)."""
    out: dict[str, float] = {}
    for item in values:
        cur, _, rate = item.partition("=")
        try:
            x = float(rate)
        except ValueError:
            x = 0.0
        if not cur.strip() or not (x > 0 and x < float("inf")):
            raise UsageError(f"--usd-rate {item!r}: give CUR=RATE, the dollars one unit of CUR is worth, e.g. EUR=1.08")
        out[cur.strip().upper()] = x
    return out


def check_post_cutoff(model: str | None, dates: list[str], data: str) -> None:
    """`--require-post-cutoff`: refuse (exit 2) a run of `model` on `dates` of `data` that may
    be in its training data; agents that are not models pass."""
    from kestrel.models.cutoff import leakage, refusal, refused

    if not model:
        return
    label = leakage(model, dates, generated=data.partition("|")[0].strip() == "sample")
    if refused(label):
        raise UsageError(refusal(label))


__all__ = ["RateFlags", "add_call_flags", "apply_rate_flags", "endpoint_rate", "rate_flags", "arm_latency", "concurrency_limits", "parse_usd_rates", "budget", "check_post_cutoff", "reply_cache", "run_policy", "tokens", "usd"]
