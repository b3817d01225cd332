"""A `--modes` file is refused at load, one line naming the file, the mode, the key and the fix
(an empty `panes` list; was exit 70, "internal error")
and a model that conflicts with the agent spec (was blamed on flags the user never passed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.session.profiles import ProfileError, load_modes

BACKENDS = ("direct", "asyncio", "trio")


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, backend: str) -> str:
    modes = tmp_path / "modes.toml"
    modes.write_text(toml)
    code = main(["simulate", "--modes", str(modes), "--mode", "x", "--backend", backend])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    (line,) = out.err.strip().splitlines()
    assert str(modes) in line and "mode 'x'" in line and "internal error" not in line
    return line


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_panes_is_refused_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    line = refused(tmp_path, capsys, "[modes.x]\npanes = []\n", backend)
    assert "panes is empty" in line and "remove the key" in line


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_and_model_naming_different_models_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    line = refused(tmp_path, capsys, '[modes.x]\nagent = "openai:gpt-4o"\nmodel = "gpt-4.1"\n', backend)
    assert "model 'gpt-4.1' conflicts with agent = 'openai:gpt-4o'" in line
    assert "--agent" not in line and "--model" not in line


def test_agreeing_or_single_model_keys_load() -> None:
    modes = load_modes(over='[modes.a]\nagent = "openai:gpt-4o"\nmodel = "gpt-4o"\n'
                            '[modes.b]\nprovider = "anthropic"\nmodel = "claude-x"\n'
                            '[modes.c]\nagent = "openai:gpt-4o"\npanes = ["quote"]\n')
    assert modes["a"].model == "gpt-4o" and modes["b"].model == "claude-x" and modes["c"].panes == ("quote",)
    with pytest.raises(ProfileError, match="mode 'd': model 'm2' conflicts"):
        load_modes(over='[modes.d]\nagent = "anthropic:m1"\nmodel = "m2"\n')
