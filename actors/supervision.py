"""Deprecated: use `kestrel_actors.supervision`."""

from kestrel_actors.supervision import *  # noqa: F403
