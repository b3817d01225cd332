"""Deprecated: use `kestrel_actors.bus`."""

from kestrel_actors.bus import *  # noqa: F403
