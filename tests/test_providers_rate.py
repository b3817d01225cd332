"""A provider row's client-side rate limit (`rpm`/`tpm` in the provider table) binds a run whose
agent spec names none; an agent spec's `|rpm=` replaces it and `--rpm` replaces both. Checked by
a loopback provider counting when each request arrived, through `kestrel simulate` in a
subprocess given its own provider table (`KESTREL_PROVIDERS`)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from model_server import serve, Canned

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = "10:00,10:30,11:00,11:30,12:00"  # with OPEN: 6 turns, one request each


def _table(tmp_path: Path, url: str, rpm: str) -> Path:
    packaged = resources.files("kestrel.providers").joinpath("providers.toml").read_text("utf-8")
    path = tmp_path / "providers.toml"
    path.write_text(packaged + f'''
[[providers]]
name = "loopback"
wire = "openai-chat"
base_url = "{url}"
key_env = ""
{rpm}
description = "the test's loopback provider"
''', encoding="utf-8")
    return path


def _simulate(table: Path, agent: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KESTREL_PROVIDERS": str(table)}
    return subprocess.run([sys.executable, "-m", "kestrel", "simulate", "--agent", agent, "--checkpoints",
                           CHECKPOINTS, "--backend", "direct", *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


@pytest.mark.parametrize(("rpm_row", "agent", "flags", "spacing"), [
    ("rpm = 150", "loopback:m", (), 0.4),  # the row's 150 per minute: one request every 0.4 s
    ("", "loopback:m", (), None),  # no row limit: back to back
    ("rpm = 6000", "loopback:m|rpm=150", (), 0.4),  # the spec's rpm over the row's
    ("rpm = 150", "loopback:m", ("--rpm", "loopback=6000"), None),  # the flag over the row's
])
def test_the_row_rate_limit_binds_unless_replaced(tmp_path: Path, rpm_row: str, agent: str,
                                                  flags: tuple[str, ...], spacing: float | None) -> None:
    with serve(lambda path, body: Canned("PASS")) as srv:
        done = _simulate(_table(tmp_path, srv.openai_url, rpm_row), agent, *flags)
        assert done.returncode == 0, done.stderr
        times = sorted(r.at for r in srv.recorded() if r.status == 200)
    assert len(times) == 6
    gaps = _gaps(times)
    if spacing is not None:
        assert min(gaps) >= spacing - 0.15, gaps  # the limiter paced every request
    else:
        assert min(gaps) < 0.2, gaps  # nothing held them back (the paced runs' gaps are all >= 0.35)


def test_a_bad_row_limit_or_table_fails_in_one_line(tmp_path: Path) -> None:
    done = _simulate(_table(tmp_path, "http://127.0.0.1:9/v1", "rpm = -5"), "loopback:m")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "rpm must be a number > 0" in done.stderr
    done = _simulate(tmp_path / "absent.toml", "loopback:m")
    assert done.returncode == 2 and "cannot read the provider table" in done.stderr
    done = _simulate(_table(tmp_path, "http://127.0.0.1:9/v1", ""), "loopback:m", "--rpm", "loopback=0")
    assert done.returncode == 2 and "--rpm 'loopback=0': give N or PROVIDER=N" in done.stderr
