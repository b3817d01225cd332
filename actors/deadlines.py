"""Deprecated: use `kestrel_actors.deadlines`."""

from kestrel_actors.deadlines import *  # noqa: F403
