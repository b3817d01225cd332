"""Data named as a capture header's `data` field (`sample`, `sample|seed=N`, or a path with
`|preset=...|crossed=...|symbol=...` options), or recorded as its typed data source, loaded for
reports and sweeps."""

from __future__ import annotations

from typing import Any

from kestrel.cli.errors import UsageError


def load_named(name: str) -> Any:
    """The `MarketData` a data name reads (a bad name or file is a `UsageError`). A module-level
    function, so a sweep can hand it to worker processes."""
    from kestrel.data import DataError, generate, load, load_sample
    from kestrel.data.sample import SAMPLE_SPEC

    head, *opts = name.split("|")
    kv = dict(o.partition("=")[::2] for o in opts)
    try:
        if head == "sample":
            return load_sample() if "seed" not in kv else generate(SAMPLE_SPEC, int(kv["seed"]))
        loaded = load(head, kv.get("preset"), crossed=kv.get("crossed", "error"),  # type: ignore[arg-type]
                      symbol=kv.get("symbol"))
    except (DataError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return loaded.data


def capture_data(header: Any) -> Any:
    """The data a capture was made on: from the typed data source its header records when it
    has one (loaded and checked by `kestrel.data.source.open_source`), else from its name."""
    import importlib

    source = getattr(header, "source", None)
    if source is None:
        return load_named(str(header.data))
    from kestrel.data import DataError

    open_source = getattr(importlib.import_module("kestrel.data.source"), "open_source")
    try:
        return open_source(source)
    except (DataError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def recorded_data_path(capture: str) -> str | None:
    """The data file a capture's header records (its typed source's path), or None (the sample,
    an old header, or a capture that cannot be read: the caller's read reports that). An output
    at this path would overwrite the capture's data, so the commands check it as an input."""
    from kestrel.session.capture import CaptureError, read_capture

    try:
        header, _ = read_capture(capture)
    except CaptureError:
        return None
    source = getattr(header, "source", None)
    path = getattr(source, "path", None)
    return str(path) if path else None


__all__ = ["capture_data", "load_named", "recorded_data_path"]
