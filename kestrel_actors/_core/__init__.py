"""The actor runtime's private core: mailboxes, refs, supervision tasks, ask deadlines, clock.

Like trio's `_core`, this package holds the implementation behind the public names of
`kestrel_actors`; import those from `kestrel_actors` (or its modules `kestrel_actors.ref`,
`.cell`, `.deadlines`, `.system`, `.bus`, ..., which re-export them), not from here. The core
imports nothing of those public modules, nor anything of Kestrel.

The seams inside the core are narrow and explicit; no module reads another object's
private members (tests/test_actors_seams.py scans for it):
- `ActorRef` -> `Cell`: the mailbox entry (`enqueue`, `post_nowait`, `post`) and the wake-up
  rule (`if cell.idle: cell.wake()`), the hand-off (`can_hand_off`, `hand_off`), `stop`.
- `Cell` -> its host: the `CellHost` protocol (`system`, `clock`, `deadlines`, `forget`,
  `fail`, `count_rejected`), implemented by `Runtime`.
- `ActorSystem` (the public facade) -> `Runtime`: lifecycle, registry, `start`, `cell_of`.
- Time: the `Clock` protocol; `EventLoopClock` is the default.
"""

from kestrel_actors._core.cell import Cell, CellHost, HandlerFailed
from kestrel_actors._core.clock import Clock, EventLoopClock
from kestrel_actors._core.deadlines import AskDeadlines
from kestrel_actors._core.envelope import AskEnvelope
from kestrel_actors._core.ref import DEFAULT_ASK_TIMEOUT, ActorRef
from kestrel_actors._core.runtime import Runtime

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "ActorRef",
    "AskDeadlines",
    "AskEnvelope",
    "Cell",
    "CellHost",
    "Clock",
    "EventLoopClock",
    "HandlerFailed",
    "Runtime",
]
