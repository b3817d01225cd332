"""Data named as a capture header's `data` field (`sample`, `sample|seed=N`, or a path with
`|preset=...|crossed=...|symbol=...` options), loaded for reports and sweeps."""

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


__all__ = ["load_named"]
