"""Reading a run's evidence back: the `--evidence` file `kestrel simulate` writes (JSON lines
through the structlog sink: each record's fields plus `event`, `level`, ...) or a sweep's
`evidence.jsonl` (the records alone). A replay makes no model calls of its own, so its report
shows the recorded run's model, tokens and dollars from this file (`kestrel report
--evidence`, `kestrel replay --evidence`); without it they are unknown, never zero.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from kestrel.session.loop import Evidence

LOG_KEYS = ("event", "level", "timestamp", "logger")
"""Keys the structlog sink adds to each record."""


class Recorded(msgspec.Struct, frozen=True):
    """A replay's calls as the recorded run made them: `evidence` that run's records, None when
    not given (its tokens and dollars are unknown)."""

    evidence: tuple[Evidence, ...] | None = None


class EvidenceError(ValueError):
    """An evidence file that cannot be read (the message names the file and the line)."""


def read_evidence(path: str | Path) -> list[Evidence]:
    """The records of an evidence file, in order."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise EvidenceError(f"cannot read the evidence file {path}: {exc.strerror}") from None
    out: list[Evidence] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = msgspec.json.decode(line)
            if not isinstance(raw, dict):
                raise msgspec.ValidationError("not a JSON object")
            for k in LOG_KEYS:
                raw.pop(k, None)
            out.append(msgspec.convert(raw, Evidence))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise EvidenceError(f"{path}, line {n}: not an evidence record ({exc}): give the file "
                                "`kestrel simulate --evidence` or a sweep run's evidence.jsonl") from None
    return out


__all__ = ["EvidenceError", "LOG_KEYS", "Recorded", "read_evidence"]
