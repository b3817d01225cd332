"""`kestrel sweep --help` names every field a grid file takes (read from the grid file's own
record, so a new field the help leaves out fails here), and nothing a grid file refuses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from kestrel.sweep.spec import GridFile

ROOT = Path(__file__).resolve().parent.parent


def test_the_help_lists_the_grid_files_fields() -> None:
    out = subprocess.run([sys.executable, "-m", "kestrel", "sweep", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={"COLUMNS": "2000", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    m = re.search(r"A grid file \(TOML\) may give the same fields: (.*?)\.(?: |$)", text)
    assert m is not None, text
    named = {f.strip().split(" ")[0] for f in m.group(1).split(",")}
    assert named == set(GridFile.__struct_fields__)
