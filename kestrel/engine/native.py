"""The engine's compiled modules: which they are, and whether this process uses them.

`tools/compile_engine.py` (`make compile`) compiles the modules in `COMPILED` with mypyc, in
place, and writes a manifest of their sources' hashes. `kestrel.engine` imports this module
before any other, and runs the pure-Python sources instead of the compiled ones when
- `KESTREL_PURE=1` is set (the differential tests compare both), or
- a compiled module is out of date with its source (an edit since the build): with a warning,
  never stale code.
Invariant: the compiled and the pure modules are the same source, so they write the same
ledgers byte for byte (tests/test_engine_native.py).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ENGINE_DIR = Path(__file__).resolve().parent
PACKAGE = "kestrel.engine"
# the hot modules, compiled together (one mypyc group: calls between them are native)
COMPILED = ("book", "broker", "dense", "envelope", "fast", "feed", "history", "money", "orders",
            "vector")
MANIFEST = "_native.json"  # in the package: the sources' hashes the build compiled
GROUP = "_native__mypyc"  # the group's shared library (`kestrel/engine/_native__mypyc.*.so`)


def _digest(module: str, engine_dir: Path) -> str:
    return hashlib.sha256((engine_dir / f"{module}.py").read_bytes()).hexdigest()


def _binaries() -> list[Path]:
    """The compiled modules' and the group's extension files present in the package."""
    out: list[Path] = []
    for stem in (*COMPILED, GROUP):
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            p = ENGINE_DIR / f"{stem}{suffix}"
            if p.exists():
                out.append(p)
    return out


def toolchain() -> dict[str, str]:
    """What compiled modules are bound to besides their sources: the interpreter's ABI tag
    and the versions of mypy (mypyc) and librt (its runtime library, checked by the
    compiled modules at import). A change makes the build stale."""
    out = {"python": sys.implementation.cache_tag or ""}
    for dist in ("mypy", "librt"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = ""
    return out


def sources(engine_dir: Path = ENGINE_DIR) -> dict[str, str]:
    """The compiled modules' sources' hashes and the toolchain (`toolchain`) as of now: take
    them before compiling, so an edit made during the build shows as stale."""
    return {**{m: _digest(m, engine_dir) for m in COMPILED},
            **{f"_{k}": v for k, v in toolchain().items()}}


def write_manifest(built: dict[str, str], engine_dir: Path = ENGINE_DIR) -> None:
    """Record what the compiled modules were built from (`sources`, taken before the build)."""
    (engine_dir / MANIFEST).write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")


def clean() -> None:
    """Remove the compiled modules and their manifest (the engine then runs pure Python)."""
    for p in _binaries():
        p.unlink()
    (ENGINE_DIR / MANIFEST).unlink(missing_ok=True)


def stale(engine_dir: Path = ENGINE_DIR) -> list[str]:
    """The compiled modules whose source changed since the build, and the toolchain parts
    that did (`python`, `mypy`, `librt`); everything when the manifest is missing or
    unreadable."""
    try:
        built = json.loads((engine_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return list(COMPILED)
    if not isinstance(built, dict):
        return list(COMPILED)
    now = sources(engine_dir)
    return [k.lstrip("_") for k in now if built.get(k) != now[k]]


def _librt() -> bool:
    """librt's parts the compiled modules use import (not a partial or broken install)."""
    try:
        for name in ("librt.vecs", "librt.strings"):
            importlib.import_module(name)
    except ImportError:
        return False
    return True


class _PureFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' pure-Python sources (ahead of the extension files)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, ENGINE_DIR / f"{name}.py")


def _choose() -> str:
    """'native' when the compiled modules are present and current, else 'pure' (and the
    finder that keeps the extension files out is installed)."""
    if not _binaries():
        return "pure"
    why = None
    if os.environ.get("KESTREL_PURE", "") not in ("", "0"):
        why = ""
    elif not _librt():
        why = ("kestrel.engine: librt (mypyc's runtime library, installed with mypy) is missing; "
               "running pure Python (pip install librt, or `make pure`)")
    else:
        old = stale()
        if old:
            why = (f"kestrel.engine: compiled modules out of date with their source or "
                   f"toolchain ({', '.join(old)}); running pure Python (rebuild with "
                   "`make compile`)")
    if why is None:
        return "native"
    if why:
        warnings.warn(why, RuntimeWarning, stacklevel=2)
    if not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())
    return "pure"


MODE = _choose()


def compiled() -> bool:
    """The engine's hot modules run compiled in this process."""
    return MODE == "native"


__all__ = ["COMPILED", "ENGINE_DIR", "MODE", "clean", "compiled", "sources", "stale", "toolchain",
           "write_manifest"]
