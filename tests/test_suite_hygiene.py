"""The test suite's own rules, read from its source with `ast`: no test module imports
another (shared helpers live in modules not named `test_*`), every `test_*` module holds
tests, and no hypothesis health check is suppressed wholesale (only a named one, where a
specific test needs it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TEST_MODULES = sorted(TESTS.glob("test_*.py"))


def _imported_modules(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_there_are_test_modules() -> None:
    assert len(TEST_MODULES) > 20


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: p.name)
def test_no_test_module_imports_another(path: Path) -> None:
    others = {p.stem for p in TEST_MODULES} | {"conftest"}
    assert not _imported_modules(ast.parse(path.read_text())) & others


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: p.name)
def test_every_test_module_holds_tests(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
        or isinstance(n, ast.ClassDef) and n.name.startswith("Test")
        for n in ast.walk(tree)
    ), f"{path.name} holds no test: name a helper module without the test_ prefix"


@pytest.mark.parametrize("path", [*TEST_MODULES, TESTS / "conftest.py"], ids=lambda p: p.name)
def test_no_wholesale_health_check_suppression(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.keyword) and node.arg == "suppress_health_check":
            value = node.value
            assert isinstance(value, ast.List | ast.Tuple), ast.unparse(value)
            assert all(
                isinstance(e, ast.Attribute) and ast.unparse(e.value) == "HealthCheck" for e in value.elts
            ), ast.unparse(value)
            assert len(value.elts) <= 2, ast.unparse(value)
