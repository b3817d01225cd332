"""The example in docs/actors.md runs as written, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_example_runs() -> None:
    text = (ROOT / "docs" / "actors.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/actors.md", "exec"), {"__name__": "docs_example"})
