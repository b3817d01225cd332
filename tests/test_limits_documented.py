"""docs/mcp.md lists every limit of `ServiceLimits` with its default, and nothing else: the
table is read back and compared with the code's `DEFAULT_LIMITS`."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from kestrel.cli.mcp import parse_limits
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits

DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"
ROW = re.compile(r"^\| `(?P<name>[a-z_]+)` \| (?P<default>[0-9][0-9_.]*)(?: \((?P<unit>[^)]*)\))? \| (?P<what>.+) \|$")
BYTES_PER = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def documented() -> dict[str, tuple[str, str | None]]:
    rows: dict[str, tuple[str, str | None]] = {}
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| limit (`--limit NAME=VALUE`) |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    for line in lines[start + 2:end]:
        m = ROW.match(line)
        assert m, f"docs/mcp.md: a limits row not in the form | `name` | default | what |: {line}"
        if m:
            assert m["name"] not in rows, f"{m['name']} documented twice"
            rows[m["name"]] = (m["default"], m["unit"])
    return rows


def test_every_limit_is_documented_with_its_default() -> None:
    rows = documented()
    fields = [f.name for f in msgspec.structs.fields(ServiceLimits)]
    assert sorted(rows) == sorted(fields), "docs/mcp.md's limits table and ServiceLimits differ"
    for name, (default, unit) in rows.items():
        value = getattr(DEFAULT_LIMITS, name)
        assert float(default) == value, f"{name}: documented {default}, the code has {value}"
        if unit is not None:  # e.g. "256 MiB" beside 268435456
            amount, _, scale = unit.partition(" ")
            assert float(amount) * BYTES_PER[scale] == value, f"{name}: {unit} is not {value}"


def test_each_documented_name_is_a_limit_the_cli_takes() -> None:
    rows = documented()
    for name, (default, _) in rows.items():
        doubled = parse_limits([f"{name}={float(default) * 2:g}"] if isinstance(getattr(DEFAULT_LIMITS, name), float)
                               else [f"{name}={int(default) * 2}"])
        assert getattr(doubled, name) == 2 * getattr(DEFAULT_LIMITS, name)
        assert type(getattr(doubled, name)) is type(getattr(DEFAULT_LIMITS, name))


def test_the_prose_names_the_tables_defaults() -> None:
    text = " ".join(DOC.read_text().split())
    assert f"a reply over `max_reply_chars` ({DEFAULT_LIMITS.max_reply_chars:,} characters)" in text
    assert f"({DEFAULT_LIMITS.max_source_chars:,} characters)" in text  # the language's document limit
    assert "0 to 10**9 per call" in text and DEFAULT_LIMITS.max_tokens_per_call == 10**9


DAEMON_DOC = DOC.parent / "daemon.md"


def test_the_daemon_doc_names_the_data_bounds_it_applies() -> None:
    """The daemon's host runs with `DEFAULT_LIMITS` (no --limit flag): its doc gives those."""
    text = " ".join(DAEMON_DOC.read_text().split())
    for name in ("max_file_bytes", "max_rows", "max_columns", "max_decoded_bytes", "load_workers", "load_seconds",
                 "cached_data", "keep_finished"):
        value = getattr(DEFAULT_LIMITS, name)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        m = re.search(rf"(\d+)(?: s)?(?: [^,;(]*?)?\s*\((?:[^)]*, )?`{name}`", text)
        assert m is not None, f"docs/daemon.md does not give {name}"
        assert m.group(1) == shown, f"docs/daemon.md: {name} is {m.group(1)}, the code has {shown}"
