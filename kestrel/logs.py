"""structlog configuration: readable console lines for the CLI, JSON lines for machines.

Two kinds of setup:
- `configure_console(...)` / `configure_json(...)` set the process-wide structlog
  configuration (the CLI calls the first, the daemon the second);
- `json_sink(stream)` / `open_json_sink(path)` build a standalone JSON-lines logger that
  leaves the global configuration alone (evidence sinks: each record is one line).

Deterministic by default: no timestamp unless `timestamps=True` (then ISO 8601 UTC), and
each JSON line is `event`, `level`, then the remaining keys sorted, so the same calls write
byte-identical output. msgspec Structs and other msgspec-encodable values are written as
JSON; anything else by its `str()`. Pure: no event loop, no I/O beyond the given stream.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TextIO, cast

import msgspec
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

Level = Literal["debug", "info", "warning", "error", "critical"]

LEVELS: tuple[Level, ...] = ("debug", "info", "warning", "error", "critical")

_encoder = msgspec.json.Encoder(enc_hook=str, order="deterministic")
_HEAD_KEYS = ("event", "level")


def _level_number(level: str) -> int:
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of: {', '.join(LEVELS)}")
    return int(getattr(logging, level.upper()))


def render_json_line(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """Final processor: one JSON object, `event` and `level` first, other keys sorted."""
    head = [
        f"{_encoder.encode(key).decode()}:{_encoder.encode(event_dict[key]).decode()}"
        for key in _HEAD_KEYS
        if key in event_dict
    ]
    rest = {key: value for key, value in event_dict.items() if key not in _HEAD_KEYS}
    body = _encoder.encode(rest).decode("utf-8")[1:-1]  # sorted keys: order="deterministic"
    return "{" + ",".join([*head, body] if body else head) + "}"


def _base_processors(timestamps: bool) -> list[Processor]:
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
    ]
    if timestamps:
        processors.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
    return processors


def json_processors(*, timestamps: bool = False) -> list[Processor]:
    """The processor chain of JSON-lines output."""
    return [
        *_base_processors(timestamps),
        structlog.processors.format_exc_info,
        render_json_line,
    ]


def console_processors(*, timestamps: bool = False, colors: bool = False) -> list[Processor]:
    """The processor chain of readable console output."""
    return [
        *_base_processors(timestamps),
        structlog.dev.ConsoleRenderer(
            colors=colors,
            sort_keys=True,
            exception_formatter=structlog.dev.plain_traceback,
        ),
    ]


class _StandardError:
    """Writes to whatever `sys.stderr` is at write time, not at configure time, so a global
    configuration never holds on to a stream that was swapped out and closed since (a test
    harness's capture, a redirected CLI)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return _isatty(sys.stderr)


def _standard_error() -> TextIO:
    return cast(TextIO, _StandardError())


def configure_console(
    *,
    stream: TextIO | None = None,
    level: Level = "info",
    timestamps: bool = False,
    colors: bool | None = None,
) -> None:
    """Process-wide: readable lines to `stream` (default stderr); colors only on a terminal."""
    out = _standard_error() if stream is None else stream
    use_colors = bool(colors) if colors is not None else _isatty(out)
    _configure(console_processors(timestamps=timestamps, colors=use_colors), level, out)


def configure_json(
    *,
    stream: TextIO | None = None,
    level: Level = "info",
    timestamps: bool = False,
) -> None:
    """Process-wide: JSON lines to `stream` (default stderr)."""
    out = _standard_error() if stream is None else stream
    _configure(json_processors(timestamps=timestamps), level, out)


def _configure(processors: list[Processor], level: Level, out: TextIO) -> None:
    """Process-wide: `processors` write to `out`; events below `level` are dropped."""
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def json_sink(
    stream: TextIO, *, level: Level = "debug", timestamps: bool = False, **context: Any
) -> structlog.typing.FilteringBoundLogger:
    """A JSON-lines logger writing to `stream`, independent of the global configuration."""
    logger: structlog.typing.FilteringBoundLogger = structlog.wrap_logger(
        structlog.WriteLogger(stream),
        processors=json_processors(timestamps=timestamps),
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        cache_logger_on_first_use=False,
    )
    return logger.bind(**context) if context else logger


@contextmanager
def open_json_sink(
    path: str | Path,
    *,
    append: bool = True,
    level: Level = "debug",
    timestamps: bool = False,
    **context: Any,
) -> Iterator[structlog.typing.FilteringBoundLogger]:
    """`with open_json_sink(path) as log:` a JSON-lines logger on a file, closed on exit."""
    target = Path(path)
    try:
        handle = target.open("a" if append else "w", encoding="utf-8")
    except OSError as exc:
        raise OSError(f"cannot open log file {target}: {exc.strerror or exc}") from exc
    with handle:
        yield json_sink(handle, level=level, timestamps=timestamps, **context)


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A logger bound to `logger=name` (if given) and `context`, per the global configuration."""
    logger = structlog.get_logger()
    if name is not None:
        logger = logger.bind(logger=name)
    return logger.bind(**context) if context else logger


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:
        return False
