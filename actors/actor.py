"""Deprecated: use `kestrel_actors.actor`."""

from kestrel_actors.actor import *  # noqa: F403
