"""Deprecated: use `kestrel_actors.ref`."""

from kestrel_actors.ref import *  # noqa: F403
