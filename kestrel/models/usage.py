"""Provider usage normalized into `kestrel.session.Usage`.

`Usage.input` INCLUDES cache reads and writes, `Usage.output` EXCLUDES thinking, `thinking` is
separate (see docs/models.md for the table). The functions read plain mappings (the SDK
objects' `model_dump()` or the JSON body), so a server that omits a field, sends `null` or a
details object of another shape counts 0 for it and never crashes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kestrel.session.protocol import Usage


def _int(obj: object, *path: str) -> int:
    """The non-negative integer at `path` in nested mappings, else 0."""
    for key in path:
        if not isinstance(obj, Mapping):
            return 0
        obj = obj.get(key)
    if isinstance(obj, bool) or not isinstance(obj, int | float) or not math.isfinite(obj):
        return 0
    return max(int(obj), 0)


def openai_usage(usage: Mapping[str, object] | None) -> Usage:
    """Chat Completions: `prompt_tokens` already includes `prompt_tokens_details.cached_tokens`
    (and `cache_write_tokens` where a server reports it); `completion_tokens` includes
    `completion_tokens_details.reasoning_tokens`."""
    if not usage:
        return Usage()
    prompt = _int(usage, "prompt_tokens")
    completion = _int(usage, "completion_tokens")
    cached = _int(usage, "prompt_tokens_details", "cached_tokens")
    written = _int(usage, "prompt_tokens_details", "cache_write_tokens") or _int(usage, "cache_write_tokens")
    reasoning = min(_int(usage, "completion_tokens_details", "reasoning_tokens"), completion)
    return Usage(
        input=prompt,
        output=completion - reasoning,
        thinking=reasoning,
        cache_read=min(cached, prompt),
        cache_write=min(written, prompt),
    )


def anthropic_usage(usage: Mapping[str, object] | None) -> Usage:
    """Messages: `input_tokens` EXCLUDES the cache, `cache_read_input_tokens` and
    `cache_creation_input_tokens` are separate; `output_tokens` INCLUDES thinking
    (`output_tokens_details.thinking_tokens` where the API reports it, else 0)."""
    if not usage:
        return Usage()
    fresh = _int(usage, "input_tokens")
    read = _int(usage, "cache_read_input_tokens")
    written = _int(usage, "cache_creation_input_tokens")
    out = _int(usage, "output_tokens")
    thinking = min(_int(usage, "output_tokens_details", "thinking_tokens"), out)
    return Usage(
        input=fresh + read + written,
        output=out - thinking,
        thinking=thinking,
        cache_read=read,
        cache_write=written,
    )


__all__ = ["anthropic_usage", "openai_usage"]
