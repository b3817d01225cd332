"""The session's boundary values are validated Structs: `SessionOptions` (guard, engine path),
evidence kinds (a closed set), and the old import paths still give the same objects."""

from __future__ import annotations

import msgspec
import pytest

from kestrel.engine.config import EngineConfig
from kestrel.session import SessionOptions as PublicOptions
from kestrel.session.loop import Evidence
from kestrel.session.options import ENGINE_PATHS, SessionError, SessionOptions, engine_path_of
from kestrel.session.protocol import Usage


def test_options_keep_their_keywords_defaults_and_positions() -> None:
    o = SessionOptions()
    assert (o.checkpoints, o.guard_s, o.engine_path, o.data_name, o.on_turn) == ((), 300, "auto", "sample", None)
    assert o.engine == EngineConfig()
    positional = SessionOptions(("11:00",), 30)
    assert (positional.checkpoints, positional.guard_s) == (("11:00",), 30)
    assert PublicOptions is SessionOptions


def test_options_are_immutable_and_validated_when_built() -> None:
    o = SessionOptions(checkpoints=("11:00",))
    with pytest.raises(AttributeError):
        o.guard_s = 5  # type: ignore[misc]  # frozen on purpose
    with pytest.raises(SessionError, match="guard must be 0 to 86399 seconds, got -1"):
        SessionOptions(guard_s=-1)
    with pytest.raises(SessionError, match="guard must be 0 to 86399 seconds, got 86400"):
        SessionOptions(guard_s=86400)
    # every field is held to its declared type when built, as decoding would hold it
    for field, value, says in (("guard_s", 1.5, "Expected `int`, got `float`"),
                               ("checkpoints", ["11:00"], "must be of type tuple, got list"),
                               ("data_name", 3, "Expected `str`, got `int`"),
                               ("engine", {"maxpos": 5}, "must be of type EngineConfig, got dict")):
        with pytest.raises(SessionError, match=f"SessionOptions: {field}.*{says}"):
            SessionOptions(**{field: value})  # type: ignore[arg-type]
    replaced = msgspec.structs.replace(o, engine_path="reference")
    assert replaced.engine_path == "reference" and replaced.checkpoints == ("11:00",)


def test_engine_paths_are_a_closed_set() -> None:
    assert ENGINE_PATHS == ("auto", "reference")
    assert [engine_path_of(p) for p in ("auto", "reference")] == ["auto", "reference"]
    for bad in ("fast", "AUTO", ""):
        with pytest.raises(SessionError, match=f"unknown engine path {bad!r}: use auto"):
            engine_path_of(bad)


def test_options_hold_callbacks_without_being_encodable_data() -> None:
    seen: list[object] = []
    o = SessionOptions(on_turn=seen.append)
    assert o.on_turn is not None
    o.on_turn("turn")  # type: ignore[arg-type]  # any object: the callback is the caller's
    assert seen == ["turn"]


def test_evidence_kinds_are_a_closed_set_on_decode() -> None:
    record = {"ordinal": "OPEN", "iteration": 0, "kind": "reply", "model": "m",
              "usage": {"input": 1}, "budget_exhausted": False}
    assert msgspec.convert(record, Evidence).kind == "reply"
    with pytest.raises(msgspec.ValidationError, match="kind"):
        msgspec.convert({**record, "kind": "replies"}, Evidence)
    assert Evidence("OPEN", 0, "late-reply", "m", Usage(), False).kind == "late-reply"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"checkpoints": ("xx",)}, "checkpoint 'xx' is not a time: write it as HH:MM"),
        ({"checkpoints": ("10:00", "25:00")}, "checkpoint '25:00' is out of range"),
        ({"allowed_panes": ("quots",)}, "unknown pane 'quots' (did you mean 'quote'?)"),
        ({"allowed_panes": ("quote", "nope")}, "unknown pane 'nope': the catalog has quote, bars"),
        ({"allowed_panes": ()}, "allowed_panes is empty"),
    ],
)
def test_checkpoints_and_panes_are_checked_when_built(kwargs: dict[str, object], says: str) -> None:
    """A bad checkpoint or pane fails where the options are made, saying what to fix (it
    used to surface inside `run_session`, the pane case as an empty 'choose from:')."""
    with pytest.raises(SessionError) as err:
        SessionOptions(**kwargs)  # type: ignore[arg-type]
    assert says in str(err.value)


def test_good_checkpoints_and_panes_pass() -> None:
    o = SessionOptions(checkpoints=("09:45", "15:30"), allowed_panes=("quote", "bars"))
    assert o.checkpoints == ("09:45", "15:30") and o.allowed_panes == ("quote", "bars")
