"""`kestrel check` and `kestrel fmt`: validate and canonicalise Kestrel documents.

`check --data UNIVERSE` (or `--symbols A,B`) checks each file as one reply of a universe turn
(`kestrel.cli.check_universe`), in the same diagnostics and `--json` shape.

Exit codes: 0 all valid (and canonical, with `fmt --check`), 1 a document is invalid or not
canonical, 2 a usage error (unreadable file, bad flags). `-` reads standard input. `check`
reads and checks every file of its batch, an unreadable one among them (reported, exit 2);
`fmt` rewrites nothing unless it can read every file.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

import msgspec

from kestrel.cli.check_universe import add_flags as add_turn_flags
from kestrel.cli.check_universe import check_turn, turn_universe
from kestrel.cli.errors import UsageError
from kestrel.cli.subcommands import Subcommands
from kestrel.lang import Diagnostic, LangError, format_source, parse
from kestrel.lang.formatter import inner_comment_lines
from kestrel.market.instrument import MAX_LOT_DECIMALS, lot_decimals
from kestrel.outputs import atomic_write


def _comments_why(lines: list[int]) -> str:
    where = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines[:10]))}"
    return (f"the comment{'s' if len(lines) > 1 else ''} on {where} follow{'' if len(lines) > 1 else 's'} "
            "the leading comment block, and the canonical form is printed from the parsed plan, "
            "which holds no comments, so they would be lost; move them into the comment block at "
            "the top of the file (kept verbatim), then run kestrel fmt --write")


class _Unreadable(Exception):
    pass


MAX_READ_BYTES = 1 << 20  # far above any document the language accepts (see Limits)


def _read(name: str) -> str:
    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_READ_BYTES + 1)
        else:
            with Path(name).open("rb") as f:  # (a device like /dev/zero never ends: read a bounded amount)
                data = f.read(MAX_READ_BYTES + 1)
    except OSError as err:
        raise _Unreadable(f"{name}: cannot read: {err.strerror or err}") from None
    if len(data) > MAX_READ_BYTES:
        raise _Unreadable(f"{name}: larger than {MAX_READ_BYTES} bytes: not a Kestrel document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _Unreadable(f"{name}: not UTF-8 text (byte {err.start})") from None


def _label(name: str) -> str:
    return "<stdin>" if name == "-" else name


def _line(name: str, d: Diagnostic) -> str:
    return d.located(_label(name))


def _read_all(names: list[str]) -> list[tuple[str, str]] | None:
    """Every file's text, or None after reporting each unreadable one: a usage error stops
    the command before it checks or rewrites anything."""
    texts: list[tuple[str, str]] = []
    ok = True
    for name in names:
        try:
            texts.append((name, _read(name)))
        except _Unreadable as err:
            print(err, file=sys.stderr)
            ok = False
    return texts if ok else None


def _report(name: str, err: LangError) -> None:
    for d in err.diagnostics:
        print(_line(name, d), file=sys.stderr)


def _check(args: argparse.Namespace) -> int:
    """Every file of the batch is read and checked: an unreadable one (missing, a folder, not
    UTF-8, too large) is reported on its own line and in the JSON, the others are checked all
    the same. Exit 2 when a file could not be read, else 1 when one is invalid, else 0."""
    status = 0
    report: list[dict[str, Any]] = []
    lot = 1.0 if args.lot_size is None else args.lot_size
    if not (lot > 0 and math.isfinite(lot)) or lot_decimals(lot) > MAX_LOT_DECIMALS:
        print(f"kestrel check: --lot-size must be a finite number > 0 with at most "
              f"{MAX_LOT_DECIMALS} decimals, got {lot:g}", file=sys.stderr)
        return 2
    try:
        universe = turn_universe(args, args.lot_size)
    except UsageError as err:
        print(f"kestrel check: {err}", file=sys.stderr)
        return 2
    for name in args.files:
        try:
            text = _read(name)
        except _Unreadable as err:
            print(err, file=sys.stderr)
            status = 2
            report.append({"file": _label(name), "ok": False, "diagnostics": [], "error": str(err)})
            continue
        if universe is not None:
            found = check_turn(text, universe)
            report.append({"file": _label(name), "ok": not found,
                           "diagnostics": [msgspec.to_builtins(d) for d in found]})
            for d in found:
                print(_line(name, d), file=sys.stderr)
            status = max(status, 1 if found else 0)
            continue
        try:
            parse(text, lot=lot)
            report.append({"file": _label(name), "ok": True, "diagnostics": []})
        except LangError as err:
            status = max(status, 1)
            report.append(
                {
                    "file": _label(name),
                    "ok": False,
                    "diagnostics": [msgspec.to_builtins(d) for d in err.diagnostics],
                }
            )
            _report(name, err)
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    return status


def _not_rewritable(name: str) -> str | None:
    """Why `fmt --write` must leave the file alone, if it must: a read-only file (no write
    permission bit, or not writable by this user) is refused although a rename could replace it
    (root, or a writable folder)."""
    try:
        mode = stat.S_IMODE(os.stat(name).st_mode)
    except OSError as err:
        return str(err.strerror or err)
    if not mode & 0o222 or not os.access(name, os.W_OK):
        return f"the file is read-only (mode {mode:o}); make it writable (chmod u+w) to let fmt --write rewrite it"
    return None


def _fmt(args: argparse.Namespace) -> int:
    if args.write and "-" in args.files:
        print("kestrel fmt: --write cannot rewrite standard input", file=sys.stderr)
        return 2
    texts = _read_all(args.files)
    if texts is None:
        return 2
    status = 0
    for name, text in texts:
        try:
            canonical = format_source(text)
        except LangError as err:
            status = 1
            _report(name, err)
            continue
        inner = inner_comment_lines(text.removeprefix("\ufeff"))
        if canonical != text and inner and (args.write or args.check):
            print(f"{_label(name)}: not in canonical form, and kestrel fmt --write cannot rewrite it: "
                  f"{_comments_why(inner)}", file=sys.stderr)
            status = 1
            continue
        if args.check:
            if canonical != text:
                print(f"{_label(name)}: not in canonical form (run kestrel fmt --write)",
                      file=sys.stderr)
                status = 1
        elif args.write:
            if canonical != text:
                why = _not_rewritable(name)
                if why is not None:
                    print(f"{_label(name)}: cannot write: {why}", file=sys.stderr)
                    return 2
                try:
                    atomic_write(name, canonical.encode("utf-8"))
                except OSError as err:
                    print(f"{_label(name)}: cannot write: {err.strerror or err}", file=sys.stderr)
                    return 2
        else:
            sys.stdout.write(canonical)
            if inner:
                print(f"{_label(name)}: note: {_comments_why(inner)}", file=sys.stderr)
    return status


def register(subparsers: Subcommands) -> None:
    check = subparsers.add_parser(
        "check", help="validate Kestrel documents (exit 1 if any is invalid)"
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="a .kes file, or - for stdin")
    check.add_argument("--json", action="store_true", help="print diagnostics as JSON on stdout")
    check.add_argument("--lot-size", type=float, default=None, metavar="LOT",
                       help="quantities must be whole numbers of LOT units (default 1: whole units; "
                            "0.0001 for BTC)")
    add_turn_flags(check)
    check.set_defaults(func=_check)
    fmt = subparsers.add_parser("fmt", help="print Kestrel documents in canonical form")
    fmt.add_argument("files", nargs="+", metavar="FILE", help="a .kes file, or - for stdin")
    mode = fmt.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not canonical")
    mode.add_argument("--write", action="store_true", help="rewrite files in canonical form")
    fmt.set_defaults(func=_fmt)


__all__ = ["register"]
