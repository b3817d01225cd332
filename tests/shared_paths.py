"""Where the tests find the real market data: `../shared/data` from the repo root, or the
folder KESTREL_SHARED_DATA names (e.g. from a worktree). Tests that need it skip cleanly when
it is absent (the `shared_data` fixture of conftest)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("KESTREL_SHARED_DATA", str(ROOT.parent / "shared" / "data")))
