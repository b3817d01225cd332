"""`Actor`: owns its state and handles one message at a time.

Defined in the private core (`kestrel_actors._core.actor`); this is its public path.
"""

from kestrel_actors._core.actor import (
    Actor,
    ActorContext,
)

__all__ = [
    "Actor",
    "ActorContext",
]
