"""The runtime's clock: `ActorSystem(clock=...)` takes any `Clock` (see `kestrel_actors._core.clock`).

`EventLoopClock` (the default) is the event loop's monotonic time; `kestrel_actors.testing.VirtualClock`
runs the same timeouts, grace periods and restart windows on virtual time.
"""

from kestrel_actors._core.clock import Clock, EventLoopClock

__all__ = ["Clock", "EventLoopClock"]
