"""Compile the engine's hot modules with mypyc, in place (`make compile`).

The compiled modules are the same source, typed: the engine runs unchanged without them
(pure Python), and `kestrel.engine` refuses compiled modules older than their source
(`kestrel/engine/native.py`). Floating point stays Python's: no FMA contraction
(`-ffp-contract=off`), no fast-math. Run `python tools/compile_engine.py --clean` to remove
them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# kestrel/engine/native.py by path: it imports nothing of kestrel (a bare python3 can clean);
# KESTREL_PURE: loading it here chooses nothing and warns about nothing
os.environ["KESTREL_PURE"] = "1"
_spec = importlib.util.spec_from_file_location("_kestrel_native", ROOT / "kestrel/engine/native.py")
assert _spec is not None and _spec.loader is not None
native = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native)


def main() -> int:
    if "--clean" in sys.argv[1:]:
        native.clean()
        return 0
    from mypyc.build import mypycify
    from setuptools import setup

    os.environ["CFLAGS"] = (os.environ.get("CFLAGS", "") + " -ffp-contract=off -fno-fast-math").strip()
    os.chdir(ROOT)
    native.clean()
    built = native.sources()  # before compiling: an edit during the build shows as stale
    sources = [f"kestrel/engine/{m}.py" for m in native.COMPILED]
    setup(
        name="kestrel-engine-native",
        packages=[],
        py_modules=[],
        ext_modules=mypycify(sources, opt_level="3", group_name="kestrel.engine._native"),
        script_args=["build_ext", "--inplace", "--build-temp", str(ROOT / "build" / "mypyc"),
                     "--build-lib", str(ROOT / "build" / "mypyc-lib")],
    )
    native.write_manifest(built)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
