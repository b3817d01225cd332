"""The `kestrel` command: the composition root.

Each command lives in its own module under `kestrel.cli` exposing
`register(subparsers) -> None`; the module adds one or more subcommands whose
parsers set `func=handler` where `handler(args) -> int` returns the exit code.
The CLI only parses flags and calls the library. Exit codes: 0 success, 1 the
command ran and found a problem (an invalid document, a failed check), 2 a
usage error (bad flags, unreadable input), 70 an internal error (a bug: one line on stderr,
the traceback only with KESTREL_DEBUG=1). A reader that goes away (`kestrel ... | head`) ends
the command quietly with 0 (`kestrel.cli.pipes`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kestrel import __version__
from kestrel._interrupt import INTERRUPTED, install
from kestrel.cli.pipes import ReaderGone, guard_stdout, reader_gone

INTERNAL_ERROR = 70  # EX_SOFTWARE: an unexpected failure inside Kestrel

# One entry per command module, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "kestrel.cli.lang", "kestrel.cli.grammar", "kestrel.cli.frame", "kestrel.cli.simulate", "kestrel.cli.report",
    "kestrel.cli.sweep", "kestrel.cli.mcp", "kestrel.cli.daemon", "kestrel.cli.ctl",
)


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on exit code 2 and a hint to `--help`."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(run `{self.prog} --help` for usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kestrel",
        description=(
            "Kestrel: agents author bounded trading plans in a typed, token-efficient "
            "language; the runtime fires them at the tick."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kestrel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the program itself (sys.argv): Ctrl-C exits 130 at once, see kestrel._interrupt
        install()
        guard_stdout()  # a reader that goes away (`| head`) ends it quietly: kestrel.cli.pipes
    from kestrel.providers import RegistryError

    try:
        parser = build_parser()
    except RegistryError as exc:  # KESTREL_PROVIDERS names a table that does not validate
        print(f"kestrel: {exc}", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except ReaderGone:  # `kestrel --help | head`
        return reader_gone()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code: int = func(args)
        sys.stdout.flush()  # here, not at exit: a reader gone before the last flush is caught too
    except KeyboardInterrupt:
        print("kestrel: interrupted", file=sys.stderr)
        return INTERRUPTED
    except (ReaderGone, BrokenPipeError):
        # The reader went away (e.g. `kestrel panes | head`): nothing left to say.
        return reader_gone()
    except Exception as exc:  # the last line of defence: never a traceback at a user
        if os.environ.get("KESTREL_DEBUG"):
            raise
        from kestrel.terminal import printable

        print(
            f"kestrel {args.command}: internal error: {type(exc).__name__}: {printable(str(exc), one_line=True)}\n"
            "this is a bug in Kestrel, not in your input; rerun with KESTREL_DEBUG=1 "
            "for the traceback and report it",
            file=sys.stderr,
        )
        return INTERNAL_ERROR
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
