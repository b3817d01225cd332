"""`kestrel grammar`: the exported dialects on stdout, kestrel.lark with `--dialect lark`, and
one-line usage errors with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_cli
from grammar_tools import read_bnf
from kestrel.lang.dialects import DIALECTS, export
from kestrel.lang.grammar import GRAMMAR

ROOT = Path(__file__).resolve().parent.parent


def test_the_default_dialect_is_the_llguidance_lark_subset(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "grammar") == (0, export("llguidance"), "")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_prints_its_export(dialect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "grammar", "--dialect", dialect) == (0, export(dialect), "")  # type: ignore[arg-type]
    code, out, err = run_cli(capsys, "grammar", "--dialect", dialect, "--module")
    assert (code, err) == (0, "") and out == export(dialect, module=True)  # type: ignore[arg-type]
    assert out != export(dialect)  # type: ignore[arg-type]


def test_lark_prints_kestrel_lark_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "grammar", "--dialect", "lark") == (0, GRAMMAR, "")


def test_module_with_lark_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "grammar", "--dialect", "lark", "--module")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("kestrel grammar: --module applies to")


def test_an_unknown_dialect_exits_2_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "grammar", "--dialect", "peg")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'peg'" in err and "llguidance" in err


def test_help_names_the_dialects_and_their_consumers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "grammar", "--help")
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("llguidance", "gbnf", "ebnf", "lark", "--module", "OpenAI", "llama.cpp", "xgrammar"):
        assert word in out


def test_the_program_prints_a_grammar_llama_cpp_reads() -> None:
    done = subprocess.run([sys.executable, "-m", "kestrel", "grammar", "--dialect", "gbnf"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == export("gbnf")
    assert "root" in read_bnf(done.stdout, "gbnf")
