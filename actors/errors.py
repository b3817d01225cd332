"""Deprecated: use `kestrel_actors.errors`."""

from kestrel_actors.errors import *  # noqa: F403
