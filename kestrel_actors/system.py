"""`ActorSystem`: actors as tasks of one anyio task group (structured concurrency).

Defined in the private core (`kestrel_actors._core.system`); this is its public path.
"""

from kestrel_actors._core.system import (
    ActorSystem,
    DEFAULT_BATCH,
    DEFAULT_GRACE,
    DEFAULT_MAILBOX,
)

__all__ = [
    "ActorSystem",
    "DEFAULT_BATCH",
    "DEFAULT_GRACE",
    "DEFAULT_MAILBOX",
]
