"""How a model call fails: three kinds, each a one-line reason.

- `ModelError`: the call failed (HTTP error, timeout, dropped connection, malformed body, a
  retryable failure that still failed after its last attempt); the ordinal stands down with
  the reason, the run goes on;
- `FatalModelError`: the run cannot succeed with this configuration (HTTP 401/403: the key is
  refused; HTTP 404: the model or the endpoint does not exist; a USD cap on a model the price
  table does not know). The session fails the run at once; the model agent answers every
  later call with the same error without contacting the provider;
- `SpendingCapReached`: a spending cap refused the call before it was made (its worst-case
  cost did not fit what is left); the reason starts with "spending cap" and the ordinal stands
  down with it. No request was sent.

All three are `ModelError`s, so a caller that only knows `ModelError` still fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class ModelError(RuntimeError):
    """A provider call failed (one line: what and why); the ordinal stands down.

    `failure_kind` is how the session classes the failure (`kestrel.session.calls.failure_kind`):
    "error" (the ordinal stands down), "fatal" (the run fails), "spending-cap" (a cap refused it).

    `retryable`: worth another attempt (a timeout, a connection failure, HTTP 408/409/429 or
    5xx). `headers`: the response's retry and rate-limit headers (`retry-after*`,
    `x-ratelimit-*`, `anthropic-ratelimit-*`; `retry.server_wait` reads them). `status`: the HTTP status, None when no response came. `maybe_billed`: the
    request may have been processed (a timeout or a connection dropped after sending), so its
    cost is unknown rather than zero."""

    failure_kind: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        headers: Mapping[str, str] | None = None,
        status: int | None = None,
        maybe_billed: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.headers: dict[str, str] = dict(headers or {})
        self.status = status
        self.maybe_billed = maybe_billed


class FatalModelError(ModelError):
    """The configuration cannot work (a refused key, an unknown model or endpoint, an
    unpriceable model under a USD cap): the run fails at once; never retried."""

    failure_kind: ClassVar[str] = "fatal"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status)


class SpendingCapReached(ModelError):
    """A spending cap refused the call before any request was sent (see `spending`)."""

    failure_kind: ClassVar[str] = "spending-cap"

    def __init__(self, message: str) -> None:
        if not message.startswith("spending cap"):
            message = f"spending cap: {message}"
        super().__init__(message, retryable=False)


FATAL_STATUS = frozenset({401, 403, 404})
"""HTTP statuses that fail the run: the key is refused (401, 403) or the model or endpoint
does not exist (404)."""

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another attempt (besides 5xx)."""


RETRY_HEADER_PREFIXES = ("retry-after", "x-ratelimit-", "anthropic-ratelimit-")


def retry_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers that say when to retry (lower-cased names)."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(RETRY_HEADER_PREFIXES)}


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


__all__ = [
    "FATAL_STATUS",
    "RETRYABLE_STATUS",
    "FatalModelError",
    "ModelError",
    "SpendingCapReached",
    "is_retryable_status",
    "retry_headers",
]
