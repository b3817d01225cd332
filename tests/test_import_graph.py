"""No import circle in kestrel/lang or kestrel/engine.

The import graph is read from the source with `ast` (no module is imported): an edge for
every import statement, deferred ones inside functions included (a deferred import only hides
a circle), `if TYPE_CHECKING:` imports excluded (they never run). `from pkg import name` is an
edge to the submodule `pkg.name` when that is a module, else to `pkg`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kestrel"
CHECKED = ("kestrel.lang", "kestrel.engine")


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST, typing_too: bool = False) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if not typing_too and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(package: Path, typing_too: bool = False) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports at run time (with `typing_too`, also
    under `if TYPE_CHECKING:`)."""
    paths = {_module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        is_pkg = path.name == "__init__.py"
        for node in _runtime_imports(ast.parse(path.read_text(), str(path)), typing_too):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in paths else base)
            graph[name] |= {t for t in targets if t in paths and t != name}
    return graph


def cycles_through(graph: dict[str, set[str]], prefixes: tuple[str, ...]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per strongly connected component of more than one
    module, or a self-loop, that holds a module under one of `prefixes` (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    out = []
    for comp in components:
        if not any(m == p or m.startswith(p + ".") for m in comp for p in prefixes):
            continue
        members = set(comp)
        path, seen = [comp[0]], {comp[0]}
        while True:  # walk inside the component until a module repeats
            nxt = sorted(graph[path[-1]] & members)[0]
            if nxt in seen:
                out.append(path[path.index(nxt) :] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return out


def test_no_import_circle_in_lang_or_engine() -> None:
    graph = import_graph(PACKAGE)
    assert "kestrel.lang.parser" in graph and "kestrel.engine.engine" in graph
    found = cycles_through(graph, CHECKED)
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_circle_in_lang_or_engine_even_through_type_only_imports() -> None:
    """A type-only circle still couples two modules' designs (the fast path typed against
    the facade that calls it): the engine's seams are Protocols instead."""
    found = cycles_through(import_graph(PACKAGE, typing_too=True), CHECKED)
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_checker_finds_a_circle_hidden_behind_a_deferred_import(tmp_path: Path) -> None:
    pkg = tmp_path / "kestrel" / "lang"
    pkg.mkdir(parents=True)
    (tmp_path / "kestrel" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "parser.py").write_text("from kestrel.lang.checker import check\n")
    (pkg / "checker.py").write_text("from kestrel.lang import formatter\n")
    (pkg / "formatter.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kestrel.lang.ast import X\n"
        "def f():\n    from .parser import parse\n"
    )
    (pkg / "ast.py").write_text("from kestrel.lang.formatter import f\n")
    graph = import_graph(tmp_path / "kestrel")
    assert graph["kestrel.lang.formatter"] == {"kestrel.lang.parser"}  # not the TYPE_CHECKING one
    assert cycles_through(graph, CHECKED) == [
        ["kestrel.lang.checker", "kestrel.lang.formatter", "kestrel.lang.parser", "kestrel.lang.checker"]
    ]
    assert cycles_through(graph, ("kestrel.engine",)) == []
    typed = import_graph(tmp_path / "kestrel", typing_too=True)
    assert typed["kestrel.lang.formatter"] == {"kestrel.lang.parser", "kestrel.lang.ast"}


@pytest.mark.parametrize("prefix", CHECKED)
def test_every_module_of_the_checked_packages_is_in_the_graph(prefix: str) -> None:
    graph = import_graph(PACKAGE)
    files = list((ROOT / Path(*prefix.split("."))).glob("*.py"))
    assert files and all(_module_name(p) in graph for p in files)


def test_no_import_circle_anywhere_in_kestrel() -> None:
    """Beyond the issue's two packages: the CLI's command modules and the rest of the core
    are circle-free too (deferred imports included)."""
    found = cycles_through(import_graph(PACKAGE, typing_too=True), ("kestrel",))
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)
