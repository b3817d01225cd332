"""The README's Python examples are real: every ```python block runs as written."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index: int) -> None:
    out = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_readme_shows_exactly_the_two_setup_commands() -> None:
    setup = README.split("## Set up", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in setup.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
