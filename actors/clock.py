"""Deprecated: use `kestrel_actors.clock`."""

from kestrel_actors.clock import *  # noqa: F403
