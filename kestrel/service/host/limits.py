"""`ServiceLimits`: the bounds a server puts on the work one client can ask of it.

A client of the MCP server is usually a language model (and over HTTP any local user holding
a token): every argument is hostile. Each bound is checked before the work it protects, so no
call can take the server's memory, its worker threads, its CPU or its connections from the
others. The defaults are documented in docs/mcp.md (one row per field); the daemon applies the
data bounds to the runs it loads.
"""

from __future__ import annotations

import msgspec

from kestrel.data.readers import ReadLimits

MIB = 1 << 20


class ServiceLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Every bound of a server (inclusive maxima)."""

    # -- data ----------------------------------------------------------------------------
    max_file_bytes: int = 256 * MIB
    """Size of one data file (checked on the open file before it is read)."""
    max_rows: int = 5_000_000
    """Data rows of one file (Parquet: from its footer, before reading)."""
    max_columns: int = 1_000
    """Columns of one file's header or schema."""
    max_decoded_bytes: int = 1024 * MIB
    """Parquet: uncompressed bytes of the columns read."""
    load_workers: int = 2
    """Data loads running at once, on threads of their own (never anyio's shared pool)."""
    load_seconds: float = 60.0
    """Wall clock one load may take before the call waiting for it gives up."""
    cached_data: int = 4
    """Loaded files kept in memory (the newest)."""

    # -- one call ------------------------------------------------------------------------
    call_seconds: float = 60.0
    """Wall clock of one tool call; past it the call is cancelled (its session closed)."""
    call_cpu_seconds: float = 30.0
    """CPU time of the work one call runs on a worker thread (`simulate`, `view`)."""
    compute_workers: int = 2
    """`simulate`/`view` computations running at once (threads of their own)."""
    max_error_chars: int = 1_000
    """Longest error text sent to a client (longer ones are cut, marked with `...`)."""
    max_source_chars: int = 20_000
    """`check`/`format`/`simulate`/`view` document length, checked before any processing
    (the language's own document limit)."""
    max_reply_chars: int = 200_000
    """`session_submit` reply length (past the language's limit a reply is a repair)."""
    max_tokens_per_call: int = 10**9
    """`input_tokens`/`output_tokens` one reply may report."""

    # -- a session -----------------------------------------------------------------------
    max_days: int = 31
    """Sessions (days) of one run."""
    max_checkpoints: int = 48
    """Authoring checkpoints per day after OPEN."""
    max_iterations: int = 16
    """`max_iterations` (view requests or repairs per ordinal)."""
    max_token_budget: int = 200_000
    """`token_budget` (authoring tokens per ordinal)."""
    max_log_bytes: int = 4 * MIB
    """Request and reply text one session's event log keeps; past it, requests and evidence
    already answered keep their place in the log but not their text."""
    max_open_sessions: int = 64
    """Sessions waiting or running at once on the server."""
    max_sessions_per_client: int = 8
    """Sessions waiting or running at once for one client identity."""
    keep_finished: int = 64
    """Finished sessions kept (with their results) until closed; the oldest go first."""

    # -- HTTP ----------------------------------------------------------------------------
    max_body_bytes: int = 1 * MIB
    """One HTTP request body."""
    body_seconds: float = 10.0
    """Wall clock to send one request body (a body trickled slower is cut off with 408)."""
    idle_seconds: float = 5.0
    """An HTTP connection with no request in flight, or whose request headers are not complete
    after this long, is closed (hypercorn's keep-alive timeout)."""
    max_requests: int = 128
    """HTTP requests served at once; more are answered 503 at once."""

    def reads(self) -> ReadLimits:
        """The data bounds as the readers check them (refusals never quote a file's text)."""
        return ReadLimits(max_bytes=self.max_file_bytes, max_rows=self.max_rows,
                          max_columns=self.max_columns, max_decoded_bytes=self.max_decoded_bytes, echo=False)


DEFAULT_LIMITS = ServiceLimits()


def cap_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (marked with `...` when cut)."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


__all__ = ["DEFAULT_LIMITS", "MIB", "ServiceLimits", "cap_text"]
