"""The CLI's user-facing error: a bad flag or input, reported in one line with exit code 2."""

from __future__ import annotations


class UsageError(Exception):
    """A bad flag or input: exit code 2 with this one-line message."""


__all__ = ["UsageError"]
