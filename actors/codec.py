"""Deprecated: use `kestrel_actors.codec`."""

from kestrel_actors.codec import *  # noqa: F403
