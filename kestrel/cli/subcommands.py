"""The one thing a command module's `register(subparsers)` needs from argparse's subparsers
action: `add_parser`, returning the subcommand's parser. A Protocol, so the command modules name
a public type instead of argparse's private `_SubParsersAction`."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subcommands(Protocol):
    """What `ArgumentParser.add_subparsers()` returns, as the command modules use it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


__all__ = ["Subcommands"]
