"""The runtime's clock: `ActorSystem(clock=...)` takes any `Clock` (see `actors._core.clock`).

`EventLoopClock` (the default) is the event loop's monotonic time; `actors.testing.VirtualClock`
runs the same timeouts, grace periods and restart windows on virtual time.
"""

from actors._core.clock import Clock, EventLoopClock

__all__ = ["Clock", "EventLoopClock"]
