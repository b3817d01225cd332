"""The seams of `kestrel_actors/` and `kestrel/`: no module reads another object's private members, no
module over 700 lines, and the historical module paths still export the public names."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import kestrel_actors
import kestrel

ACTORS = Path(kestrel_actors.__file__).resolve().parent
KESTREL = Path(kestrel.__file__).resolve().parent
MAX_LINES = 700

# Underscore names that are documented public API of the standard library, not private members.
PUBLIC_UNDERSCORE = frozenset({"os._exit"})


def private_reads(source: str, filename: str = "<source>") -> list[str]:
    """Every access to a `_private` member of an object other than `self`/`cls`, as
    `file:line: expression`: an attribute (`other._x`, read, write or delete) or a
    `getattr`/`setattr`/`hasattr`/`delattr` with a constant private name. Dunders are public."""

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    def own(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in ("self", "cls")

    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and private(node.attr) and not own(node.value):
            if ast.unparse(node) not in PUBLIC_UNDERSCORE:
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
            and not own(node.args[0])
        ):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:  # `from m import _name`: another module's private member
                if private(alias.name):
                    found.append((node.lineno, node.col_offset, f"from {node.module} import {alias.name}"))
    return [f"{filename}:{line}: {expression}" for line, _, expression in sorted(found)]


def modules() -> list[Path]:
    found = sorted(ACTORS.rglob("*.py"))
    assert ACTORS / "_core" / "cell.py" in found  # the scan reaches the core package
    return found


def test_the_scan_finds_private_reads_and_spares_own_members() -> None:
    source = (
        "class A:\n"
        "    def f(self, other, cell):\n"
        "        self._mine = cls._also = other.public\n"
        "        x = other._theirs\n"
        "        cell.system._forget(cell)\n"
        "        other._written = 1\n"
        "        getattr(other, '_hidden', None)\n"
        "        return getattr(self, '_own'), type(x).__name__, x._\n"
        "from m import _helper, public as _alias\n"
    )
    assert private_reads(source, "a.py") == [
        "a.py:4: other._theirs",
        "a.py:5: cell.system._forget",
        "a.py:6: other._written",
        "a.py:7: getattr(other, '_hidden', None)",
        "a.py:8: x._",
        "a.py:9: from m import _helper",
    ]


def test_no_module_of_the_runtime_reads_another_objects_private_members() -> None:
    found = [
        hit
        for path in modules()
        for hit in private_reads(path.read_text(), str(path.relative_to(ACTORS.parent)))
    ]
    assert found == []


def kestrel_modules() -> list[Path]:
    found = sorted(KESTREL.rglob("*.py"))
    assert KESTREL / "session" / "runner.py" in found
    return found


def test_no_module_of_kestrel_reads_another_objects_private_members() -> None:
    found = [
        hit
        for path in kestrel_modules()
        for hit in private_reads(path.read_text(), str(path.relative_to(KESTREL.parent)))
    ]
    assert found == []


def test_the_scan_spares_documented_underscore_names_only() -> None:
    source = "import os, argparse\nos._exit(1)\nargparse._SubParsersAction\n"
    assert private_reads(source, "b.py") == ["b.py:3: argparse._SubParsersAction"]


@pytest.mark.parametrize("root", [ACTORS, KESTREL], ids=["actors", "kestrel"])
def test_no_module_is_over_700_lines(root: Path) -> None:
    sizes = {
        str(path.relative_to(root.parent)): len(path.read_text().splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    assert len(sizes) > 10
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert over == {}


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("kestrel_actors.ref", ["ActorRef", "DEFAULT_ASK_TIMEOUT"]),
        ("kestrel_actors.system", ["ActorSystem"]),
        ("kestrel_actors.actor", ["Actor", "ActorContext"]),
        ("kestrel_actors.bus", ["Bus", "BusActor", "SlowPolicy", "Subscription", "StreamSubscription"]),
        ("kestrel_actors.supervision", ["Restart", "Stop", "Escalate", "SupervisionPolicy"]),
        ("kestrel_actors.errors", ["ActorStopped", "AskTimeout", "EscalationError"]),
        ("kestrel_actors.clock", ["Clock", "EventLoopClock"]),
    ],
)
def test_the_historical_module_paths_export_the_public_names(
    module: str, names: list[str]
) -> None:
    loaded = importlib.import_module(module)
    for name in names:
        assert getattr(loaded, name) is getattr(kestrel_actors, name), f"{module}.{name}"


def test_the_moved_internals_are_reexported_from_their_old_modules() -> None:
    from kestrel_actors import _core
    from kestrel_actors.cell import Cell
    from kestrel_actors.deadlines import AskDeadlines
    from kestrel_actors.ref import AskEnvelope

    assert (Cell, AskDeadlines, AskEnvelope) == (_core.Cell, _core.AskDeadlines, _core.AskEnvelope)
