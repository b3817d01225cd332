"""Spending caps: a budget in USD and/or tokens that a call must fit BEFORE it is made.

Before each call the model agent holds the call's worst case on every budget it answers to
(the run's, and a sweep's shared by its runs): the estimated input tokens (no cache discount)
plus the output limit (the thinking budget included), priced at the model's list prices by
`genai-prices` (`cost.dollars`). A budget whose spent + held + worst case would pass its cap
refuses: `SpendingCapReached`, no request is sent, and the ordinal stands down with "spending
cap: ...". When the call ends, its hold becomes what it really cost (`settle`: the usage
the provider reported, priced); a call that failed without being processed (an HTTP error)
is `release`d; one whose outcome is unknown (a timeout, a dropped connection) is settled at
its worst case, never at zero.

Invariants:
- a hold is taken only when spent + held + the call's worst case fits the cap, under the
  budget's lock, so concurrent calls (worker threads, several runs of a sweep) cannot together
  cross it; a call's actual cost passes its worst case only by the error of the input
  estimate (`estimate_tokens`), so the spent total can pass the cap by at most that;
- a cached reply costs nothing and holds nothing;
- a USD cap on a model the price table does not know is a configuration error
  (`FatalModelError`), never an unchecked call.
A cross-process budget (the runs of a sweep's worker processes) keeps the same three numbers
in a SQLite row and takes each hold in one `BEGIN IMMEDIATE` transaction; `SpendingBudget`'s
methods are the interface it implements.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import msgspec

from kestrel.models.cost import dollars
from kestrel.models.errors import FatalModelError, SpendingCapReached
from kestrel.session.protocol import Usage


class SpendingCap(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The caps (None: not capped). Tokens count as the authoring budget does: input +
    output + thinking."""

    max_usd: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_usd is not None and (not math.isfinite(self.max_usd) or self.max_usd < 0):
            raise ValueError(f"a USD cap must be a number >= 0, got {self.max_usd}")
        if self.max_tokens is not None and self.max_tokens < 0:
            raise ValueError(f"a token cap must be >= 0, got {self.max_tokens}")


class Hold(msgspec.Struct, frozen=True):
    """A call's worst case, held on one budget until it is settled or released."""

    usd: float
    tokens: int


def worst_case_usd(provider: str, model: str, input_tokens: int, output_tokens: int) -> float | None:
    """The list price of `input_tokens` uncached input and `output_tokens` output (None:
    the model is not in the price table)."""
    return dollars(provider, model, Usage(input=input_tokens, output=output_tokens))


def _usd(x: float) -> str:
    return f"${x:.4f}" if x < 1 else f"${x:,.2f}"


class SpendingBudget:
    """One budget (thread-safe; share the object to share the budget). `name` says whose it
    is in a refusal ("run", "sweep")."""

    def __init__(self, cap: SpendingCap, *, name: str = "run") -> None:
        self.cap = cap
        self.name = name
        self._lock = threading.Lock()
        self._spent_usd = 0.0
        self._spent_tokens = 0
        self._held_usd = 0.0
        self._held_tokens = 0
        self._open = 0
        self.refused = 0

    def check_priceable(self, provider: str, model: str) -> None:
        """Fail (fatal) when a USD cap is set and `model` cannot be priced."""
        if self.cap.max_usd is not None and worst_case_usd(provider, model, 1, 1) is None:
            raise FatalModelError(
                f"spending cap: {provider}:{model} is not in the price table (genai-prices), so a "
                f"USD cap cannot be checked: use a token cap for it, or no USD cap"
            )

    def reserve(self, usd: float | None, tokens: int) -> Hold:
        """Hold a call's worst case (`usd` None: unpriceable, refused under a USD cap), or
        raise `SpendingCapReached` without holding anything."""
        cap = self.cap
        with self._lock:
            if cap.max_usd is not None:
                if usd is None:
                    self.refused += 1
                    raise SpendingCapReached(f"spending cap: the call cannot be priced, so it cannot fit "
                                             f"the {self.name}'s {_usd(cap.max_usd)} cap")
                left = cap.max_usd - self._spent_usd - self._held_usd
                if usd > left + 1e-12:
                    self.refused += 1
                    raise SpendingCapReached(
                        f"spending cap: the call's worst case {_usd(usd)} does not fit the "
                        f"{_usd(max(left, 0.0))} left of the {self.name}'s {_usd(cap.max_usd)} cap"
                    )
            if cap.max_tokens is not None:
                left_t = cap.max_tokens - self._spent_tokens - self._held_tokens
                if tokens > left_t:
                    self.refused += 1
                    raise SpendingCapReached(
                        f"spending cap: the call's worst case {tokens:,} tokens does not fit the "
                        f"{max(left_t, 0):,} left of the {self.name}'s {cap.max_tokens:,}-token cap"
                    )
            hold = Hold(usd or 0.0, tokens)
            self._held_usd += hold.usd
            self._held_tokens += hold.tokens
            self._open += 1
        return hold

    def _drop(self, hold: Hold) -> None:
        self._open -= 1
        self._held_tokens -= hold.tokens
        # no float residue once nothing is held
        self._held_usd = self._held_usd - hold.usd if self._open else 0.0

    def settle(self, hold: Hold, usd: float | None, tokens: int) -> None:
        """The call ended and cost `usd` (None: unpriceable, charged at the hold) and `tokens`."""
        with self._lock:
            self._drop(hold)
            self._spent_usd += hold.usd if usd is None else usd
            self._spent_tokens += tokens

    def release(self, hold: Hold) -> None:
        """The call was not processed: nothing spent."""
        with self._lock:
            self._drop(hold)

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent_usd

    @property
    def spent_tokens(self) -> int:
        with self._lock:
            return self._spent_tokens

    @property
    def held(self) -> Hold:
        with self._lock:
            return Hold(self._held_usd, self._held_tokens)


def reserve_all(budgets: Sequence[SpendingBudget], usd: float | None, tokens: int) -> list[Hold]:
    """Hold on every budget, or on none (a refusal releases the holds already taken)."""
    holds: list[Hold] = []
    try:
        for b in budgets:
            holds.append(b.reserve(usd, tokens))
    except SpendingCapReached:
        for b, h in zip(budgets, holds, strict=False):
            b.release(h)
        raise
    return holds


__all__ = ["Hold", "SpendingBudget", "SpendingCap", "reserve_all", "worst_case_usd"]
