"""Deprecated: use `kestrel_actors.testing`."""

from kestrel_actors.testing import *  # noqa: F403
from kestrel_actors.testing import __all__ as __all__
