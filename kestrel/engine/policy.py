"""The fast path's cost model and its statistics (`fast.run_fast`, `Engine.fast_policy`).

msgspec Structs in a module that is not compiled: a Struct class defined in a mypyc-compiled
module loses its class options (`frozen=True`), so the compiled and the pure engine would
differ. `kestrel.engine.fast` re-exports them.
"""

from __future__ import annotations

import msgspec


class FastPolicy(msgspec.Struct, frozen=True):
    """When the fast path hands a batch over to the compiled loop: after at least
    `min_events` processed events, if they came more often than one per
    `dense_ticks_per_event` ticks; or when the rule masks would need more than
    `max_mask_ticks` ticks or, at the bytes per tick the current masks take, more than
    `max_mask_mb` MB (bounded memory on long sessions)."""

    dense_ticks_per_event: float = 300.0
    min_events: int = 32
    max_mask_ticks: int = 20_000_000
    max_mask_mb: float = 100.0
    dense_loop: bool = True  # dense stretches run on the vector-fed loop (`dense`), not the compiled one
    force_dense: bool = False  # the dense loop from the batch's first tick, whatever the density
    dense_prefix_ratio: float = 4.0  # the dense loop's columns cover the session so far: at most this x the batch


DEFAULT_POLICY = FastPolicy()


class FastStats(msgspec.Struct):
    """How one fast-path batch was spent: ticks run on the dense loop, ticks handed to the
    compiled loop, and events processed by the jump loop (`Engine.fast_stats`)."""

    dense_ticks: int = 0
    compiled_ticks: int = 0
    jumps: int = 0


__all__ = ["DEFAULT_POLICY", "FastPolicy", "FastStats"]
