"""Helpers shared by the CLI tests: run `kestrel` in process, and write generated quotes as an
ISO-timestamp CSV (the `oanda` layout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kestrel.cli import main
from kestrel.data import SyntheticSpec, generate


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kestrel ARGV` run in process."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def quotes_csv(path: Path, sessions: int, seed: int) -> Path:
    """`sessions` FX sessions of generated quotes (one every 4 s) written to `path` as CSV."""
    t = generate(SyntheticSpec(sessions=sessions, tick_interval_s=4.0), seed=seed).ticks
    stamps = np.datetime_as_string(t.ts.astype("datetime64[ns]"), unit="ms").tolist()
    path.write_text("ts_utc,bid,ask\n" + "".join(f"{s}Z,{b:.2f},{a:.2f}\n" for s, b, a in
                                                 zip(stamps, t.bid.tolist(), t.ask.tolist())))
    return path
