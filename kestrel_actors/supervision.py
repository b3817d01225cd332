"""Supervision policies: what happens when an actor's handler raises.

Defined in the private core (`kestrel_actors._core.supervision`); this is its public path.
"""

from kestrel_actors._core.supervision import (
    Escalate,
    Restart,
    RestartWindow,
    Stop,
    SupervisionPolicy,
)

__all__ = [
    "Escalate",
    "Restart",
    "RestartWindow",
    "Stop",
    "SupervisionPolicy",
]
