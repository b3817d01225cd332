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


def test_internal_error_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kestrel.cli as cli

    def boom(args: object) -> int:
        raise RuntimeError("engine exploded")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    args = parser.parse_args(["panes"])
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    args.func = boom
    monkeypatch.delenv("KESTREL_DEBUG", raising=False)
    assert cli.main(["panes"]) == cli.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: engine exploded" in err
    assert "KESTREL_DEBUG=1" in err
    assert "Traceback" not in err

    monkeypatch.setenv("KESTREL_DEBUG", "1")
    with pytest.raises(RuntimeError, match="engine exploded"):
        cli.main(["panes"])
