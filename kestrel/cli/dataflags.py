"""Flags shared by the commands that load market data (`simulate`, `view`) and write files.

- `add_data_flags` / `load_from_args`: `--data sample|PATH` with the loading options, giving
  the `MarketData`, its `DataSource` (what a capture records) and a label for reports; the
  load report goes to stderr;
- `parse_guard`: `--guard` as seconds (`300`) or a duration (`30s`, `5m`, `1h`), one syntax for
  every command;
- `check_paths`: outputs that collide with each other or with an input, and output folders
  that do not exist or cannot be written, are refused before anything runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kestrel.cli.errors import UsageError

if TYPE_CHECKING:  # the data modules load only when data is read
    from kestrel.data.news import NewsSource
    from kestrel.data.source import DataSource
    from kestrel.market.news import NewsFeed
    from kestrel.market.data import MarketData

_DURATION = re.compile(r"^(\d+)([smh]?)$")
# every flag `load_from_args` reads (a cache of loaded data keys on them)
DATA_FLAGS = ("data", "delimiter", "preset", "crossed", "spikes", "spike_factor", "symbol", "tick_size",
              "multiplier", "currency", "seed", "columns")
_FILE_ONLY = ("delimiter", "preset", "crossed", "spikes", "spike_factor", "tick_size", "multiplier", "currency",
              "columns")


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number like 0.01, got {text!r}") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"expected a positive number like 0.01, got {text!r}")
    return x


def _currency(text: str | None) -> str | None:
    """`--currency` as a code: surrounding blanks dropped, upper case (`eur` is EUR)."""
    return None if text is None else text.strip().upper()


_DELIMITERS = {",": ",", ";": ";", "|": "|", "tab": "\t", "\\t": "\t", "\t": "\t"}


def delimiter_arg(text: str) -> str:
    """`--delimiter`: one of `,` `;` `|` or `tab` (also a literal tab or `\\t`)."""
    d = _DELIMITERS.get(text.strip().lower() if text.strip() else text)
    if d is None:
        raise argparse.ArgumentTypeError(f"expected ',', ';', '|' or 'tab', got {text!r}")
    return d


def add_data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="sample", help="'sample' (default, generated) or a CSV/Parquet file")
    p.add_argument("--delimiter", type=delimiter_arg, default=None, metavar="SEP",
                   help="the field separator of a CSV --data PATH: ',' (default), ';', '|' or 'tab'")
    p.add_argument("--preset", help="loader preset for --data PATH (default: detected from the columns)")
    p.add_argument("--columns", default=None, metavar="ROLE=COL,...",
                   help="map --data PATH's columns to roles, e.g. ts=Date,close=Last (roles: ts, symbol, open, high, "
                        "low, close, volume, bid, ask, bid_size, ask_size, price, size, ...); default: inferred "
                        "from common names when no preset matches")
    p.add_argument("--crossed", choices=("error", "drop", "keep"), default=None,
                   help="crossed quotes (ask < bid) in --data PATH: error (default), drop or keep")
    p.add_argument("--spikes", choices=("error", "drop", "keep"), default=None,
                   help="one-row price spikes that revert in --data PATH: error (default), drop or keep")
    p.add_argument("--spike-factor", type=positive_float, default=None, metavar="F",
                   help="a price more than F times away from both neighbours is a spike (default 2)")
    p.add_argument("--symbol", help="instrument symbol (for --data PATH; checked against the sample)")
    p.add_argument("--tick-size", type=positive_float, default=None, metavar="T",
                   help="the instrument's tick size for --data PATH (default: inferred from the prices)")
    p.add_argument("--multiplier", type=positive_float, default=None, metavar="M",
                   help="money per price point per unit for --data PATH (default: the preset's, else 1)")
    p.add_argument("--currency", default=None, help="the quote currency code for --data PATH, e.g. USD or ETH (upper-cased; "
                        "default: the preset's)")
    p.add_argument("--seed", type=int, help="with --data sample: generate the sample from this seed (>= 0)")
    p.add_argument("--news", default=None, metavar="PATH",
                   help="headlines for the news pane: a JSON-lines, CSV or Parquet file (recorded with its SHA-256)")
    p.add_argument("--blind", action="store_true",
                   help="blind mode: the agent reads an alias, session numbers, prices rescaled to 100 and masked news")


def parse_date(text: str | None) -> dt.date | None:
    """`--date YYYY-MM-DD` (None when not given); `UsageError` naming the form otherwise."""
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--date must be YYYY-MM-DD, got {text!r}") from None


def news_from_args(args: argparse.Namespace, command: str) -> tuple[NewsFeed, NewsSource | None]:
    """The feed and source of `--news PATH` (the empty feed without it); `UsageError` on a bad file."""
    from kestrel.data import DataError
    from kestrel.data.news import load_news
    from kestrel.market.news import NO_NEWS

    path = getattr(args, "news", None)
    if path is None:
        return NO_NEWS, None
    if not path.strip():
        raise UsageError("--news is empty: give the path of a news file (.jsonl, .csv or .parquet) or leave it out")
    try:
        loaded = load_news(path)
    except DataError as exc:
        raise UsageError(str(exc)) from None
    print(f"kestrel {command}: news: {loaded.source.items} items", file=sys.stderr)
    return loaded.feed, loaded.source


def load_from_args(args: argparse.Namespace, command: str) -> tuple[MarketData, DataSource, str]:
    """(MarketData, DataSource, label) for the data flags; `UsageError` on any bad input."""
    from kestrel.data import DataError, generate, load, load_sample
    from kestrel.data.sample import SAMPLE_SPEC, sample_seed
    from kestrel.data.source import file_sha256, file_source, sample_source

    name = args.data.strip()
    if not name:
        raise UsageError("--data is empty: give 'sample' or the path of a CSV/Parquet file")
    if name == "sample":
        given = [f"--{k.replace('_', '-')}" for k in _FILE_ONLY if getattr(args, k, None) is not None]
        if given:
            raise UsageError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --data PATH only "
                             "(the sample is generated clean, with a fixed instrument)")
        if args.seed is not None:
            try:
                sample_seed(args.seed)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        data = load_sample() if args.seed is None else generate(SAMPLE_SPEC, args.seed)
        if args.symbol and args.symbol != data.symbol:
            raise UsageError(f"--symbol {args.symbol} does not match the sample's symbol {data.symbol}")
        label = "sample" if args.seed is None else f"sample (seed {args.seed})"
        return data, sample_source(data, args.seed), label
    if args.seed is not None:
        raise UsageError("--seed applies to --data sample only")
    options: dict[str, Any] = {
        "crossed": args.crossed or "error", "spikes": args.spikes or "error", "symbol": args.symbol,
        "tick_size": args.tick_size, "multiplier": args.multiplier, "currency": _currency(args.currency),
        "delimiter": getattr(args, "delimiter", None), "columns": getattr(args, "columns", None),
    }
    if args.spike_factor is not None:
        if args.spike_factor <= 1:
            raise UsageError(f"--spike-factor must be a number > 1, got {args.spike_factor:g}")
        options["spike_factor"] = args.spike_factor
    try:
        loaded = load(name, args.preset, **options)
        digest = file_sha256(name)
    except (DataError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    for note in loaded.report.notes():
        print(f"kestrel {command}: {note}", file=sys.stderr)
    source = file_source(loaded.report, loaded.data, digest, options["delimiter"] or ",", columns=options["columns"])
    # recorded as every surface records a data file (daemon, MCP): its real path, symlinks resolved
    return loaded.data, source, source.path or name


def parse_guard(text: str | int) -> int:
    """`--guard` in seconds: a whole number (`300`) or a duration (`30s`, `5m`, `1h`), 0..86399."""
    m = _DURATION.match(str(text).strip())
    if m is None:
        raise UsageError(f"--guard must be seconds like 300 or a duration like 30s, 5m or 1h, got {text!r}")
    seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if not 0 <= seconds < 86400:
        raise UsageError(f"--guard must be 0 to 86399 seconds (under a day), got {text!r}")
    return seconds


def _key(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _probe_folder(flag: str, path: str, folder: Path) -> None:
    """Create and remove a temporary file in `folder`: `os.access` says yes to root even where
    nothing can be created (a read-only mount, /sys), so only trying tells."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kestrel-probe.", dir=folder)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create a file in {str(folder)!r} "
                         f"({exc.strerror or exc}); choose a writable folder") from None
    os.close(fd)
    os.unlink(tmp)


def check_paths(outputs: list[tuple[str, str | None]], inputs: list[tuple[str, str | None]]) -> None:
    """Refuse, before anything runs: an empty output path, two outputs at one path, an output
    that is an input, an output that exists and is not a regular file (a folder, device, FIFO or
    socket, also behind a symlink), in a folder that does not exist, or where no file can be
    created. A symlink output is written through to its regular target."""
    seen: dict[str, str] = {}
    for label, path in inputs:
        if path:
            seen.setdefault(_key(path), f"the input {label}")
    for flag, path in outputs:
        if path is None:
            continue
        if not path.strip():
            raise UsageError(f"{flag} is empty: give a file path or leave the flag out")
        key = _key(path)
        other = seen.get(key)
        if other is None and Path(path).exists():
            other = next((what for k, what in seen.items() if Path(k).exists() and os.path.samefile(k, path)), None)
        if other is not None:
            raise UsageError(f"{flag} {path} is the same file as {other}: give each output its own path")
        seen[key] = flag
        real = Path(key)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{flag} {path}: is a directory; give a file path")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{flag} {path}: is not a regular file (a device, FIFO or socket); "
                             "give the path of a regular file")
        parent = real.parent
        if not parent.is_dir():
            shown = Path(path).parent if str(Path(path).parent) else Path(".")
            raise UsageError(f"{flag} {path}: no such directory {str(shown)!r}")
        if st is not None and not os.access(real, os.W_OK):
            raise UsageError(f"{flag} {path}: not writable")
        _probe_folder(flag, path, parent)


def agent_input(spec: str | None) -> str | None:
    """The file an agent spec reads (`fixed:PLAN.kes`, `recorded:CAPTURE.jsonl`,
    `replies:FILE`), if any."""
    if spec and ":" in spec:
        kind, _, path = spec.partition(":")
        if kind in ("fixed", "recorded", "replies") and path:
            return path
    return None


__all__ = ["DATA_FLAGS", "add_data_flags", "agent_input", "check_paths", "load_from_args", "news_from_args", "parse_date", "parse_guard",
           "positive_float"]
