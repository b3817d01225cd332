"""Deprecated: use `kestrel_actors.system`."""

from kestrel_actors.system import *  # noqa: F403
