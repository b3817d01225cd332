"""`kestrel ctl`: the daemon's command-line client (a blocking stdlib socket, no event loop).

Exit codes: 0 done; 1 the daemon answered but the outcome is not a success (a failed or
cancelled run, a wait that timed out, no daemon running, the daemon stopped while answering); 2 bad input (bad flags, an unknown
run, a run that cannot be exported yet); 70 an internal error of the daemon.

A reply too long for one line arrives as `part` notifications, joined here
(`kestrel.service.daemon.protocol.Reassembler`). Everything printed from the daemon (run
reasons, argv, summaries, turns) goes through `kestrel.terminal.printable`: no control
character reaches the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kestrel.cli.errors import UsageError
from kestrel.cli.subcommands import Subcommands
from kestrel.terminal import printable
from kestrel.service.daemon.protocol import (
    INTERNAL_ERROR,
    MAX_LINE,
    PROTOCOL_VERSION,
    REFUSED,
    Reassembler,
    HelloParams,
    NoParams,
    Params,
    RunParams,
    SubmitParams,
    WaitParams,
    encode,
    request,
)


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser(
        "ctl",
        help="control a running daemon: submit runs, list, show, wait, follow, cancel, export, shutdown",
        description="Talk to `kestrel daemon` over HOME/kestrel.sock.",
    )
    p.add_argument("--home", help="the daemon's folder (default $KESTREL_HOME, else $XDG_STATE_HOME/kestrel)")
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    sub.add_parser("ping", help="check the daemon answers")
    s = sub.add_parser("submit", help="submit a run: any `kestrel simulate` flags (and --pace); prints the run id last",
                       prefix_chars="\0")
    s.add_argument("flags", nargs=argparse.REMAINDER, help="kestrel simulate flags, e.g. --checkpoints 11:00 --pace 600")
    r = sub.add_parser("runs", help="list the runs")
    r.add_argument("--json", action="store_true")
    sh = sub.add_parser("show", help="one run's state and summary")
    sh.add_argument("run")
    sh.add_argument("--json", action="store_true")
    w = sub.add_parser("wait", help="wait until a run ends (exit 0 done, 1 failed/cancelled/timed out)")
    w.add_argument("run")
    w.add_argument("--timeout", type=float, metavar="S")
    f = sub.add_parser("follow", help="stream a run's turns, fills and end as they happen")
    f.add_argument("run")
    f.add_argument("--json", action="store_true", help="every committed record as one JSON line")
    c = sub.add_parser("cancel", help="cancel a run")
    c.add_argument("run")
    e = sub.add_parser("export", help="write a finished run's ledger, capture and evidence")
    e.add_argument("run")
    e.add_argument("--ledger", required=True)
    e.add_argument("--capture", required=True)
    e.add_argument("--evidence")
    sub.add_parser("shutdown", help="stop the daemon (unfinished runs resume on its next start)")
    p.set_defaults(func=_ctl)


def say(*parts: object, file: Any = None, flush: bool = False) -> None:
    """`print`, control characters escaped (what the daemon sends is not ours to trust)."""
    print(printable(" ".join(str(p) for p in parts)), file=file, flush=flush)


class CtlError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class NoDaemon(Exception):
    pass


class DaemonStopped(CtlError):
    """The daemon closed the connection before answering (it was stopped): `ctl` exits 1."""

    def __init__(self) -> None:
        super().__init__(INTERNAL_ERROR, "the daemon closed the connection")


class Client:
    """A blocking connection to the daemon (says hello on connect)."""

    def __init__(self, path: Path, timeout: float | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self.sock.close()
            raise NoDaemon(str(exc)) from None
        self.file = self.sock.makefile("rwb")
        self._id = 0
        self.hello = self.call("hello", HelloParams(PROTOCOL_VERSION, "kestrel ctl"))

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: Params | None = None,
             on_event: Callable[[dict[str, Any]], None] | None = None) -> Any:
        self._id += 1
        self.file.write(encode(request(method, self._id, params)))
        self.file.flush()
        parts = Reassembler()
        while True:
            line = self.file.readline(MAX_LINE + 1)
            if not line:
                raise DaemonStopped()
            msg = json.loads(line)
            if "id" not in msg and msg.get("method") == "part":
                try:
                    whole = parts.take(msg["params"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise CtlError(INTERNAL_ERROR, f"a long reply could not be joined: {exc}") from None
                if whole is None:
                    continue
                msg = json.loads(whole)
            if "id" not in msg and msg.get("method") == "event":
                if on_event is not None:
                    on_event(msg["params"])
                continue
            if msg.get("error"):
                raise CtlError(int(msg["error"]["code"]), str(msg["error"]["message"]))
            return msg.get("result")


def _ctl(args: argparse.Namespace) -> int:
    from kestrel.cli.daemon import home_of

    action = getattr(args, "action", None)
    if action is None:
        say("kestrel ctl: give an action: ping, submit, runs, show, wait, follow, cancel, export, shutdown",
              file=sys.stderr)
        return 2
    home = home_of(args.home)
    try:
        if action == "submit":
            _check_submit(args.flags)
        with Client(home.socket) as client:
            return _ACTIONS[action](client, args)
    except UsageError as exc:
        say(f"kestrel ctl {action}: {exc}", file=sys.stderr)
        return 2
    except NoDaemon:
        say(f"kestrel ctl: no daemon is running on {home.root} (start one with "
              f"`kestrel daemon --home {home.root}`)", file=sys.stderr)
        return 1
    except DaemonStopped:
        say(f"kestrel ctl {action}: the daemon stopped (it closed the connection before answering)",
              file=sys.stderr)
        return 1
    except CtlError as exc:
        say(f"kestrel ctl {action}: {exc}", file=sys.stderr)
        return 2 if exc.code in (REFUSED, -32602, -32600, -32601) else (70 if exc.code == INTERNAL_ERROR else 1)
    except BrokenPipeError:  # the reader went away (`kestrel ctl runs | head`): nothing left to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        say(f"kestrel ctl {action}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _check_submit(flags: list[str]) -> None:
    """Parse the flags here first: a typo fails at once with the simulate parser's message."""
    from kestrel.cli.daemon import check_submit, submit_parser

    if any(f in ("-h", "--help") for f in flags):
        submit_parser().print_help()
        raise SystemExit(0)
    try:
        check_submit(submit_parser().parse_args(flags))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _ping(c: Client, args: argparse.Namespace) -> int:
    h = c.hello
    c.call("ping", NoParams())
    say(f"pong: {h['server']}, pid {h['pid']}, home {h['home']}, protocol {h['protocol']}")
    return 0


def _submit(c: Client, args: argparse.Namespace) -> int:
    r = c.call("submit", SubmitParams(list(args.flags), os.getcwd()))
    say(f"submitted run {r['run']} (pace {r['pace']})")
    say(r["run"])
    return 0


def _line(i: dict[str, Any]) -> str:
    total = ""
    if i.get("summary"):
        total = f" total={i['summary'].get('total')}"
    return (f"{i['run']}  {i['state']:<9}  pace {i['pace']:<8}  turns {i['turns']:>3}  fills {i['fills']:>4}"
            f"  {i['submitted']}{total}  {' '.join(i['argv'])}")


def _runs(c: Client, args: argparse.Namespace) -> int:
    r = c.call("runs", NoParams())
    for i in r["runs"]:
        say(json.dumps(i, sort_keys=True) if args.json else _line(i))
    if not r["runs"] and not args.json:
        say("no runs")
    return 0


def _show(c: Client, args: argparse.Namespace) -> int:
    i = c.call("show", RunParams(args.run))
    if args.json:
        say(json.dumps(i, sort_keys=True))
        return 0
    for k in ("run", "state", "reason", "pace", "submitted", "ended", "turns", "ledger_events", "fills", "resumed"):
        if i.get(k) is not None:
            say(f"{k:<14}{i[k]}")
    say(f"{'argv':<14}{' '.join(i['argv'])}")
    summary = i.get("summary") or {}
    head = "total" if "total" in summary else "metrics"  # one symbol's totals, a universe's metrics
    rows = _leaves(head, summary[head]) if isinstance(summary.get(head), dict) else []
    width = max((len(k) for k, _ in rows), default=0) + 2
    for key, value in rows:
        say(f"{key:<{width}}{value}")
    rest = sorted(k for k in summary if k != head)
    if rest:
        say(f"also in the summary: {', '.join(rest)} (ctl show {i['run']} --json)")
    return 0


def _leaves(prefix: str, value: Any) -> list[tuple[str, str]]:
    """A nested record as one `dotted.key  value` row per leaf, keys sorted, so `ctl show`
    reads like a table (lists and scalars are leaves, shown as JSON)."""
    if isinstance(value, dict) and value:
        return [row for k in sorted(value) for row in _leaves(f"{prefix}.{k}", value[k])]
    return [(prefix, json.dumps(value, sort_keys=True))]


def _ended(i: dict[str, Any]) -> int:
    reason = f" ({i['reason']})" if i.get("reason") else ""
    say(f"run {i['run']} {i['state']}{reason}")
    return 0 if i["state"] == "done" else 1


def _wait(c: Client, args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.timeout >= 0:
        raise UsageError(f"--timeout must be >= 0 seconds, got {args.timeout}")
    c.sock.settimeout(None)
    return _ended(c.call("wait", WaitParams(args.run, args.timeout)))


def _describe(item: dict[str, Any]) -> str | None:
    """One readable line for a turn, a fill or the end (other records: None)."""
    kind, body = item["kind"], item["body"]
    if kind == "turn" and "text" in body:  # a universe run's turn: its reply text, what it did
        text = " / ".join(line.strip() for line in str(body["text"]).splitlines())
        return f"turn  {body['date']} {body['ordinal']}: {text} ({body['applied']})"
    if kind == "turn":
        import msgspec

        from kestrel.agents.recorded import turn_text
        from kestrel.session.capture import CapturedTurn

        t = msgspec.convert(body, CapturedTurn)
        text = " / ".join(line.strip() for line in turn_text(t.turn).splitlines())
        return f"turn  {t.date} {t.ordinal}: {text}"
    if kind == "ledger" and body.get("event") == "fill":
        on = f" {body['symbol']}" if "symbol" in body else ""
        return f"fill  {item['key']}:{on} {body['side']} {body['qty']} @ {body['price']} (order {body['id']}, fee {body['fee']})"
    if kind == "end":
        reason = f" ({body['reason']})" if body.get("reason") else ""
        summary = body.get("summary") or {}
        figures = summary.get("total") or summary.get("metrics")  # one symbol's totals, a universe's metrics
        total = f": {json.dumps(figures, sort_keys=True)}" if figures else ""
        return f"end   {body['state']}{reason}{total}"
    return None


def _follow(c: Client, args: argparse.Namespace) -> int:
    def show(item: dict[str, Any]) -> None:
        text = json.dumps(item, sort_keys=True) if args.json else _describe(item)
        if text is not None:
            say(text, flush=True)

    c.sock.settimeout(None)
    info = c.call("follow", RunParams(args.run), on_event=show)
    return 0 if info["state"] == "done" else 1


def _cancel(c: Client, args: argparse.Namespace) -> int:
    i = c.call("cancel", RunParams(args.run))
    say(f"run {i['run']} {i['state']}")
    return 0


def _export(c: Client, args: argparse.Namespace) -> int:
    from kestrel.cli.dataflags import check_paths
    from kestrel.outputs import atomic_write

    check_paths([("--ledger", args.ledger), ("--capture", args.capture), ("--evidence", args.evidence)], [])
    r = c.call("export", RunParams(args.run))
    for path, key in ((args.ledger, "ledger"), (args.capture, "capture"), (args.evidence, "evidence")):
        if path:
            try:
                atomic_write(path, r[key].encode())
            except OSError as exc:
                raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    say(f"exported run {args.run}")
    return 0


def _shutdown(c: Client, args: argparse.Namespace) -> int:
    r = c.call("shutdown", NoParams())
    say(f"daemon: {r['message']}")
    return 0


_ACTIONS: dict[str, Callable[[Client, argparse.Namespace], int]] = {
    "ping": _ping,
    "submit": _submit,
    "runs": _runs,
    "show": _show,
    "wait": _wait,
    "follow": _follow,
    "cancel": _cancel,
    "export": _export,
    "shutdown": _shutdown,
}

__all__ = ["Client", "CtlError", "NoDaemon", "register"]
