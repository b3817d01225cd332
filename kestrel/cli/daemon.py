"""`kestrel daemon`: the long-running session host behind an owner-only Unix socket.

The composition root of the daemon: it wires `actors.daemon` (socket, store, recovery) to the
same flag resolution as `kestrel simulate` (`SimulatePlanner`), so `kestrel ctl submit FLAGS`
runs exactly the session `kestrel simulate FLAGS` runs. The client is `kestrel.cli.ctl`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kestrel.cli.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "daemon",
        help="run the Kestrel daemon in the foreground (runs sessions, keeps them, survives kill -9)",
        description=(
            "Run the daemon in the foreground (for systemd or `&`): one actor system hosting many "
            "runs, controlled by `kestrel ctl` over HOME/kestrel.sock (owner only). Every turn, "
            "ledger event and evidence record is committed to HOME/kestrel.db as it happens; a "
            "restarted daemon resumes unfinished runs without calling their agents again for "
            "committed turns. SIGTERM/SIGINT stop it cleanly (exit 0)."
        ),
    )
    p.add_argument("--home", help="the daemon's folder (default $KESTREL_HOME, else $XDG_STATE_HOME/kestrel)")
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio", help="anyio backend (default asyncio)")
    p.set_defaults(func=_daemon)
    from kestrel.cli import ctl

    ctl.register(subparsers)


def home_of(arg: str | None) -> Any:
    from actors.daemon.home import Home, default_home

    return Home(Path(arg).expanduser() if arg else default_home())


def _daemon(args: argparse.Namespace) -> int:
    import anyio

    from actors.daemon import HomeError, Lock, StoreError, configure_logs, serve_daemon

    home = home_of(args.home)
    try:
        home.prepare()
        lock = Lock(home)
        lock.acquire()
    except HomeError as exc:
        print(f"kestrel daemon: {exc}", file=sys.stderr)
        return 2
    log = configure_logs(home)
    try:
        anyio.run(lambda: serve_daemon(home, SimulatePlanner()), backend=args.backend)
    except StoreError as exc:
        print(f"kestrel daemon: {exc}", file=sys.stderr)
        return 2
    finally:
        lock.release()
        log.close()
    return 0


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise UsageError(message or "flags not accepted here (--help is for the command line)")


def submit_parser() -> argparse.ArgumentParser:
    """The `kestrel simulate` flag parser, raising `UsageError` instead of exiting."""
    from kestrel.cli import simulate

    holder: argparse.ArgumentParser = _RaisingParser(prog="kestrel ctl")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = holder.add_subparsers(parser_class=_RaisingParser)
    simulate.register(sub)
    parser: argparse.ArgumentParser = sub.choices["simulate"]
    parser.prog = "kestrel ctl submit"
    return parser


def absolutize(ns: argparse.Namespace, cwd: str) -> None:
    """Make the paths among `kestrel simulate` flags absolute (relative to `cwd`)."""
    base = Path(cwd)

    def full(p: str) -> str:
        return str((base / Path(p).expanduser()).resolve())

    if ns.data != "sample":
        ns.data = full(ns.data)
    kind, sep, arg = (ns.agent or "").partition(":")
    if sep and kind.strip().lower() in ("fixed", "recorded") and arg:
        ns.agent = f"{kind}:{full(arg)}"
    for flag in ("capture", "ledger", "evidence"):
        if getattr(ns, flag, None):
            setattr(ns, flag, full(getattr(ns, flag)))


class SimulatePlanner:
    """`actors.daemon.Planner` over `kestrel simulate`'s flags and resolution."""

    def __init__(self) -> None:
        import threading

        from actors.host import DataCache

        self.parser = submit_parser()
        self._data = DataCache(size=4)  # by name and file mtime: a changed file is reloaded
        self._lock = threading.Lock()

    def load(self, name: str) -> Any:
        """`kestrel simulate`'s loader, cached (resolutions run on worker threads)."""
        from kestrel.cli.simulate import load_data

        with self._lock:
            data = self._data.get(name)
        if data is None:
            data = load_data(name)
            with self._lock:
                self._data.put(name, data)
        return data

    def parse(self, argv: list[str], cwd: str) -> tuple[dict[str, Any], list[str]]:
        try:
            ns = self.parser.parse_args(argv)
        except UsageError as exc:
            raise ValueError(f"kestrel ctl submit: {exc}") from None
        if not Path(cwd).is_absolute():
            raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
        absolutize(ns, cwd)
        flags = {k: v for k, v in vars(ns).items() if k != "func"}
        return flags, list(argv)

    def resolve(self, flags: dict[str, Any]) -> Any:
        from actors.daemon.runs import Job
        from kestrel.cli.simulate import prepare
        from kestrel.session.runner import SessionError, session_days
        from kestrel.session.schedule import ScheduleError
        from kestrel.session.spec import ResolvedRun, RunSpec

        ns = self.parser.parse_args([])
        for k, v in flags.items():
            if hasattr(ns, k):
                setattr(ns, k, v)
        ns.backend = "asyncio"  # the daemon's own backend runs it
        try:
            run = prepare(ns, self.load)
            schedule = session_days(run.data, run.options, run.date, run.days)
        except (UsageError, SessionError, ScheduleError) as exc:
            raise ValueError(str(exc)) from None
        outputs = {k: getattr(ns, k) for k in ("capture", "ledger", "evidence") if getattr(ns, k, None)}
        resolved = ResolvedRun(RunSpec(), run.data, run.options, run.date, run.days, schedule)
        return Job(resolved, run.agent, run.pace, outputs)


__all__ = ["SimulatePlanner", "absolutize", "home_of", "register", "submit_parser"]
