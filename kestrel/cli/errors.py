"""The CLI's user-facing error: a bad flag or input, reported in one line with exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable


class UsageError(Exception):
    """A bad flag or input: exit code 2 with this one-line message."""


class MissingKeyError(UsageError):
    """A model agent's API key variable `env` is unset (or empty) in this process's
    environment; `agent` names the agent (`provider:model`)."""

    def __init__(self, message: str, agent: str, env: str) -> None:
        super().__init__(message)
        self.agent = agent
        self.env = env


def guarded(command: str, run: Callable[[], int]) -> int:
    """Run a subcommand's body: a `UsageError`, `SessionError` or `ScheduleError` it raises
    becomes one line `kestrel COMMAND: message` on stderr, its control characters escaped
    (`kestrel.terminal`), and exit code 2 (warnings only on the console)."""
    from kestrel.logs import configure_console
    from kestrel.session.runner import SessionError
    from kestrel.session.schedule import ScheduleError

    configure_console(level="warning")
    try:
        return run()
    except (UsageError, SessionError, ScheduleError) as exc:
        from kestrel.terminal import printable

        print(f"kestrel {command}: {printable(str(exc))}", file=sys.stderr)
        return 2


__all__ = ["MissingKeyError", "UsageError", "guarded"]
