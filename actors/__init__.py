"""Deprecated import path of the actor runtime, kept for one release: use `kestrel_actors`.

Every name of `kestrel_actors` is re-exported here, and `actors.testing` re-exports
`kestrel_actors.testing`. Importing this package warns (DeprecationWarning).
"""

import warnings

from kestrel_actors import *  # noqa: F403
from kestrel_actors import __all__ as __all__

warnings.warn(
    "the `actors` package is now `kestrel_actors`; `actors` goes away in the next release",
    DeprecationWarning,
    stacklevel=2,
)
