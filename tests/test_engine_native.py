"""The compiled engine (mypyc, `make compile`) writes the pure engine's ledgers byte for byte,
and a build out of date with its source is never run: the engine falls back to pure Python
with a warning. The differential runs `native_ledgers.py` twice, once with KESTREL_PURE=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kestrel.engine import native

ROOT = Path(__file__).resolve().parent.parent
needs_build = pytest.mark.skipif(
    not native.compiled(), reason="the engine is not compiled here (make compile)")


def _run(args: list[str], pure: bool, cwd: Path = ROOT,
         pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KESTREL_PURE", "PYTHONPATH")}
    if pure:
        env["KESTREL_PURE"] = "1"
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def _ledgers(pure: bool) -> dict[str, Any]:
    proc = _run([str(ROOT / "tests" / "native_ledgers.py"), "60"], pure)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@needs_build
def test_compiled_engine_writes_the_pure_engines_ledgers() -> None:
    native_run, pure_run = _ledgers(pure=False), _ledgers(pure=True)
    assert (native_run["mode"], pure_run["mode"]) == ("native", "pure")
    assert native_run["broker"].endswith((".so", ".pyd")) and pure_run["broker"] == "broker.py"
    a, b = native_run["ledgers"], pure_run["ledgers"]
    assert len(a) >= 200 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def test_stale_lists_the_modules_whose_source_changed(tmp_path: Path) -> None:
    for m in native.COMPILED:
        shutil.copy(native.ENGINE_DIR / f"{m}.py", tmp_path)
    assert native.stale(tmp_path) == list(native.COMPILED)  # no manifest: all
    built = native.sources(tmp_path)
    native.write_manifest(built, tmp_path)
    assert native.stale(tmp_path) == []
    with (tmp_path / "broker.py").open("a") as f:
        f.write("# an edit\n")
    assert native.stale(tmp_path) == ["broker"]
    # the toolchain the modules were compiled with: another librt or interpreter is stale too
    native.write_manifest({**built, "_librt": "0.0.1", "_python": "cpython-00"}, tmp_path)
    assert native.stale(tmp_path) == ["broker", "python", "librt"]
    (tmp_path / native.MANIFEST).write_text("not json")
    assert native.stale(tmp_path) == list(native.COMPILED)
    (tmp_path / native.MANIFEST).write_text("[1]")
    assert native.stale(tmp_path) == list(native.COMPILED)


@needs_build
def test_a_stale_build_runs_pure_python_with_a_warning(tmp_path: Path) -> None:
    """A copy of the package whose broker.py was edited after the build: the engine imports
    the pure sources (the edit is what runs) and says why."""
    shutil.copytree(ROOT / "kestrel", tmp_path / "kestrel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (tmp_path / "kestrel" / "engine" / "broker.py").open("a") as f:
        f.write("EDITED_AFTER_THE_BUILD = True\n")
    probe = ("import warnings; warnings.simplefilter('always');"
             "import kestrel.engine as e, kestrel.engine.broker as b, kestrel.engine.dense as d;"
             "print(e.native.MODE, b.__file__.endswith('.py'), d.__file__.endswith('.py'),"
             " getattr(b, 'EDITED_AFTER_THE_BUILD', False))")
    proc = _run(["-c", probe], pure=False, cwd=tmp_path, pythonpath=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["pure", "True", "True", "True"]
    assert "compiled modules out of date with their source or toolchain (broker)" in proc.stderr
    assert "make compile" in proc.stderr
    # the same copy, unedited source restored: the build is current again and runs
    shutil.copy(ROOT / "kestrel" / "engine" / "broker.py", tmp_path / "kestrel" / "engine")
    proc = _run(["-c", probe], pure=False, cwd=tmp_path, pythonpath=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["native", "False", "False", "False"]


@needs_build
def test_the_tests_that_patch_engine_internals_pass_on_the_pure_modules() -> None:
    """Tests that patch a compiled module's class or globals (a compiled caller never sees
    the patch) skip on the compiled build; here they run with KESTREL_PURE=1."""
    proc = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::RuntimeWarning",
                 "tests/test_engine_kernel_speed.py",
                 "tests/test_engine_differential.py::test_fast_path_matches_reference_byte_for_byte"],
                pure=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " skipped" not in proc.stdout and " passed" in proc.stdout, proc.stdout[-500:]
