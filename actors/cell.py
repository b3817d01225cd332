"""Deprecated: use `kestrel_actors.cell`."""

from kestrel_actors.cell import *  # noqa: F403
