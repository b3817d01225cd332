"""`python -m kestrel_actors.demo` prints a working exchange, identically on both backends."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import anyio

from kestrel_actors import demo

ROOT = Path(__file__).resolve().parent.parent


def render(backend: str) -> str:
    out = io.StringIO()
    anyio.run(demo.run, out, backend=backend)
    return out.getvalue()


def test_demo_output_is_deterministic_and_backend_independent() -> None:
    first = render("asyncio")
    assert render("asyncio") == first
    assert render("trio") == first
    lines = first.splitlines()
    assert 'ponger -> main  {"type":"pong","seq":3,"by":"ponger"}' in lines
    assert "ponger restarted with fresh state: has seen 0 pings" in lines
    assert "risk (block)               got fills [1, 2, 3, 4], position 25" in lines
    assert "ledger (block)             got fills [1, 2, 3, 4], position 25" in lines
    assert "tape (drop_oldest, cap 2)  got fills [3, 4], dropped 2" in lines
    assert "fills: stream#1  drop_oldest capacity 2     pending 0 drops 2" in lines
    assert "stopping 4 actors: ponger, risk, ledger, bus" in lines
    assert lines[-1] == "stopped; actors left: 0"


def test_demo_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kestrel_actors.demo", "--backend", "trio"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    # A readable structlog console line, without a timestamp (the output is deterministic).
    assert "\n[warning  ] actor.restart                  [kestrel_actors] actor=ponger" in result.stdout
    assert result.stdout.rstrip().endswith("stopped; actors left: 0")
