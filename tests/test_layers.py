"""The package layers are a checked contract: `[tool.importlinter]` in pyproject.toml is the
one layer table, `lint-imports` checks it (run-time, deferred and TYPE_CHECKING imports all
count), and each kind of breach is shown to break it on a copy of the tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("kestrel", "kestrel_actors")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root, capture_output=True, text=True, timeout=240, check=False,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_the_tree_keeps_every_contract() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.fixture(scope="module")
def copy_of_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return root


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # an arrow up the table: the report layer reads the CLI
        ("kestrel/report/svg.py", "from kestrel.cli import main", "Kestrel's layers"),
        # a type-only arrow up counts too: the engine typed against the session layer
        ("kestrel/engine/money.py",
         "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kestrel.session.protocol import Usage",
         "Kestrel's layers"),
        # a deferred import hides nothing: the market model reads the frame
        ("kestrel/market/bars.py", "def _late() -> None:\n    from kestrel.frame import text", "Kestrel's layers"),
        # the session actors reach up to the host
        ("kestrel/service/actors/feed.py", "from kestrel.service.host import events", "The services"),
        # the runtime imports Kestrel
        ("kestrel_actors/codec.py", "import kestrel.logs", "imports nothing of Kestrel"),
        # the private core imports the public face
        ("kestrel_actors/_core/clock.py", "from kestrel_actors import supervision", "private core"),
    ],
    ids=["arrow-up", "type-only", "deferred", "service", "runtime-kestrel", "core-face"],
)
def test_each_breach_breaks_its_contract(copy_of_tree: Path, module: str, line: str, broken: str) -> None:
    target = copy_of_tree / module
    original = target.read_text()
    try:
        target.write_text(original + "\n" + line + "\n")
        result = lint(copy_of_tree)
    finally:
        target.write_text(original)
    assert result.returncode != 0
    broken_part = result.stdout.split("Broken contracts", 1)[-1]
    assert broken in broken_part, result.stdout[-3000:]


def test_a_package_cycle_breaks_the_acyclic_contract(copy_of_tree: Path) -> None:
    """Two packages of one layer line (independent siblings) that import each other."""
    a, b = copy_of_tree / "kestrel/data/errors.py", copy_of_tree / "kestrel/frame/text.py"
    texts = a.read_text(), b.read_text()
    try:
        a.write_text(texts[0] + "\nfrom kestrel.frame import text as _t\n")
        b.write_text(texts[1] + "\nfrom kestrel.data import errors as _e\n")
        result = lint(copy_of_tree)
    finally:
        a.write_text(texts[0])
        b.write_text(texts[1])
    assert result.returncode != 0
    assert "No cycle between the packages" in result.stdout.split("Broken contracts", 1)[-1]


def test_a_new_package_must_take_a_place_in_the_table(copy_of_tree: Path) -> None:
    new = copy_of_tree / "kestrel" / "newthing"
    new.mkdir()
    (new / "__init__.py").write_text('"""A package nobody placed."""\n')
    try:
        result = lint(copy_of_tree)
    finally:
        shutil.rmtree(new)
    assert result.returncode != 0
    assert "newthing" in result.stdout


def test_the_architecture_page_shows_the_checked_table() -> None:
    """docs/architecture.md's layer table is the contract's, row by row."""
    import re
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    contract = [sorted(f"kestrel.{name.strip()}" for name in row.split("|")) for row in config["layers"]]
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## The layer table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    shown = [sorted(re.findall(r"`(kestrel\.[a-z_]+)`", row.split("|")[2])) for row in rows]
    assert shown == contract
