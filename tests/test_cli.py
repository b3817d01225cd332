from __future__ import annotations

import subprocess
import sys

import pytest

from kestrel import __version__
from kestrel.cli import main


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"kestrel {__version__}"


def test_help_lists_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "usage: kestrel" in capsys.readouterr().out


def test_unknown_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kestrel", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"kestrel {__version__}"
