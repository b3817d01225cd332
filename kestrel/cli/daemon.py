"""`kestrel daemon`: the long-running session host behind an owner-only Unix socket.

The composition root of the daemon: it wires `kestrel.service.daemon` (socket, store, recovery) to the
same flag resolution as `kestrel simulate` (`SimulatePlanner`), so `kestrel ctl submit FLAGS`
runs exactly the session `kestrel simulate FLAGS` runs. The client is `kestrel.cli.ctl`.

The daemon reads data files only under its `--data-root` folders (none: the bundled sample
only), each data file (`--data`, `--factors`, `--instruments`, `--news`) checked by
`kestrel.service.host.roots.DataRoots` at submit and again at resume; the path a run records is the file's real path (symlinks resolved), as every surface
records it. Loaded data is cached by the file's identity and checked against the SHA-256 of the
bytes it was loaded from. The daemon runs under umask 077 and distrusts its home
(`kestrel.service.daemon.home`).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path
from typing import Any

from kestrel.cli.agentspec import read_agent_input
from kestrel.cli.callflags import concurrency_limits
from kestrel.cli.errors import MissingKeyError, UsageError
from kestrel.cli.subcommands import Subcommands

AGENT_FILE = "agent_file"
"""The stored flags' key for the `--agent` file's bytes (base64), read at submit."""


def register(subparsers: Subcommands) -> None:
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
    p.add_argument("--data-root", action="append", default=[], metavar="DIR",
                   help="read --data files under DIR (repeatable; default: none, only the bundled sample)")
    p.add_argument("--max-concurrency", action="append", metavar="N|PROVIDER=N",
                   help="model calls in flight at once to each endpoint (N), or to each endpoint of PROVIDER "
                        "(PROVIDER=N), shared by every run of the daemon (default: an agent's |concurrency=, else "
                        "unbounded); repeatable or comma-separated")
    p.set_defaults(func=_daemon)


def home_of(arg: str | None) -> Any:
    from kestrel.service.daemon.home import Home, default_home

    return Home(Path(arg).expanduser() if arg else default_home())


def _daemon(args: argparse.Namespace) -> int:
    import anyio

    from kestrel.service.daemon import HomeError, Lock, StoreError, configure_logs, serve_daemon
    from kestrel.service.host.roots import DataRoots
    from kestrel.terminal import printable

    os.umask(0o077)  # everything the daemon creates is its owner's only
    try:
        roots = DataRoots.of(args.data_root)
        calls = DaemonCalls(*concurrency_limits(args.max_concurrency or []))
    except (ValueError, UsageError) as exc:
        print(f"kestrel daemon: {printable(str(exc))}", file=sys.stderr)
        return 2
    home = home_of(args.home)
    try:
        home.prepare()
        lock = Lock(home)
        lock.acquire()
    except HomeError as exc:
        print(f"kestrel daemon: {printable(str(exc))}", file=sys.stderr)
        return 2
    try:
        log = configure_logs(home)
    except HomeError as exc:
        lock.release()
        print(f"kestrel daemon: {printable(str(exc))}", file=sys.stderr)
        return 2
    try:
        anyio.run(lambda: serve_daemon(home, SimulatePlanner(roots, calls)), backend=args.backend)
    except (StoreError, HomeError) as exc:
        print(f"kestrel daemon: {printable(str(exc))}", file=sys.stderr)
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
    sub = holder.add_subparsers(parser_class=_RaisingParser)
    simulate.register(sub)
    parser: argparse.ArgumentParser = sub.choices["simulate"]
    parser.prog = "kestrel ctl submit"
    return parser


OTHER_DATA_FILES = ("factors", "instruments", "news")
"""The flags naming data files besides `--data` (a universe's factor file, symbols table, news)."""


def absolutize(ns: argparse.Namespace, cwd: str, roots: Any = None) -> None:
    """Make the paths among `kestrel simulate` flags absolute (relative to `cwd`); `--data`
    and the other files of data (`--factors`, `--instruments`, `--news`) are confined to
    `roots` (a `DataRoots`; None: made absolute only) and become the files' real paths.
    Raises ValueError (a `DataRefused`) for data outside the roots."""
    from kestrel.service.host.roots import DataRefused, recorded_path

    base = Path(cwd)

    def full(p: str) -> str:
        return str((base / Path(p).expanduser()).resolve())

    def confined(flag: str, p: str) -> str:
        if roots is None:
            return recorded_path(base / p)
        try:
            return str(roots.confine(p, base=cwd))
        except DataRefused as exc:
            raise DataRefused(f"{flag}: {exc}") from None

    from kestrel.cli.dataflags import agent_input

    if ns.data.strip() not in ("", "sample"):
        ns.data = confined("--data", ns.data)
    path = agent_input(ns.agent)
    if path is not None:
        ns.agent = f"{ns.agent.partition(':')[0]}:{full(path)}"
    for name in OTHER_DATA_FILES:  # confined as --data is
        if getattr(ns, name, None):
            setattr(ns, name, confined(f"--{name}", getattr(ns, name)))
    for flag in ("capture", "ledger", "evidence", "modes", "reply_cache"):
        if getattr(ns, flag, None):
            setattr(ns, flag, full(getattr(ns, flag)))


def check_submit(ns: argparse.Namespace) -> None:
    """Refuse what `kestrel simulate` refuses before it runs (`check_paths` probes each
    output's folder with a file, so `/proc/x` is refused up front). Raises ValueError."""
    from kestrel.cli.dataflags import agent_input, check_paths
    from kestrel.cli.simulate import DIRECT
    from kestrel.session.pace import PaceError, parse_pace

    try:
        pace = parse_pace(ns.pace)
    except PaceError:
        pace = None  # refused with its own message when the run is resolved
    if pace is not None and ns.backend == DIRECT:
        raise ValueError("--pace needs the actor feed: use --backend asyncio or trio (or --pace max)")
    if is_universe_run(ns):
        for flag, given in (("--pace", pace is not None), ("--symbol", ns.symbol)):
            if given:
                raise ValueError(f"{flag} runs a single-symbol session; a universe run does not take it: drop it "
                                 "(or, for one member, --symbol without the portfolio flags)")
    data_input = None if ns.data.strip() in ("", "sample") else ns.data
    outputs = [("--capture", ns.capture), ("--ledger", ns.ledger), ("--evidence", ns.evidence)]
    try:
        check_paths(outputs, [("--data", data_input), ("--agent", agent_input(ns.agent)), ("--modes", ns.modes)])
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def is_universe_run(ns: argparse.Namespace) -> bool:
    """Whether submitted flags run a universe: a portfolio flag (`--symbols`, `--capital`, ...),
    or a long-format `--data` file (a `symbol` column) without `--symbol` picking one member."""
    from kestrel.cli.universe import is_universe

    flagged = is_universe(argparse.Namespace(**{**vars(ns), "data": ""}))
    return flagged or (is_universe(ns) and not ns.symbol)


def universe_job(ns: argparse.Namespace, content: bytes | None, calls: DaemonCalls) -> Any:
    """The daemon's `Job` of a universe run: the universe, bounds, options and agent `kestrel
    simulate --data UNIVERSE` builds from the same flags (so the same ledger and capture);
    `content` the `fixed:` plan file's bytes as stored at submit. Raises ValueError."""
    from kestrel.cli.dataflags import news_from_args, parse_date, parse_guard
    from kestrel.cli.execution import engine_config
    from kestrel.cli.universe import load_source
    from kestrel.cli.callflags import arm_latency
    from kestrel.market.portfolio import PortfolioBounds
    from kestrel.service.daemon.runs import Job
    from kestrel.service.host import UniverseRun, UniverseSpec
    from kestrel.session.options import SessionError, SessionOptions
    from kestrel.session.portfolio import DEFAULT_CAPITAL, ModuleAgent, pick_universe_sessions
    from kestrel.session.portfolio_capture import UniverseSource

    symbols = None if ns.symbols is None else [s.strip() for s in ns.symbols.split(",") if s.strip()]
    if symbols is not None and not symbols:
        raise ValueError("--symbols is empty: give symbols like AAPL,MSFT")
    try:
        source = UniverseSource(ns.data, ns.columns, ns.factors, ns.delimiter or ",", ns.crossed or "error",
                                ns.spikes or "error", getattr(ns, "instruments", None))
        universe = load_source(source, symbols, "daemon")
        news, news_source = news_from_args(ns, "daemon")
        bounds = PortfolioBounds(capital=ns.capital or DEFAULT_CAPITAL, max_gross=ns.max_gross or 1.0,
                                 max_open=ns.max_open, session_maxloss=ns.portfolio_maxloss, no_short=ns.no_short,
                                 lookback=getattr(ns, "lookback", None) or "run")
        options = SessionOptions(checkpoints=tuple(c for c in ns.checkpoints.split(",") if c.strip()),
                                 guard_s=parse_guard(ns.guard), engine_path=ns.engine_path,
                                 engine=engine_config(ns, None), data_name=ns.data, blind=ns.blind, news=news,
                                 arm_latency=arm_latency(getattr(ns, "arm_latency", None)),
                                 cadence=getattr(ns, "cadence", None) or "open",
                                 universe_end_of_day=getattr(ns, "end_of_day", None))
        sessions = pick_universe_sessions(universe, parse_date(ns.date), ns.days)
    except (UsageError, SessionError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    spec = ns.agent or ""
    if spec.startswith("fixed:") and content is not None:
        agent: Any = ModuleAgent(content.decode("utf-8", "replace"), Path(spec.removeprefix("fixed:")).stem)
    elif not spec or spec == "baseline" or spec.startswith("fixed:"):
        raise ValueError("a universe run needs --agent fixed:PLANS.kes (plans ON each symbol) or a model agent "
                         "(--agent PROVIDER:MODEL)")
    else:
        from kestrel.cli.agentspec import agent_of

        try:
            agent = agent_of(spec, model=ns.model, base_url=ns.base_url, api_key_env=ns.api_key_env,
                             timeout_s=ns.agent_timeout)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        calls.share(agent)
    outputs = {k: getattr(ns, k) for k in ("capture", "ledger", "evidence") if getattr(ns, k, None)}
    run = UniverseRun(UniverseSpec(data=ns.data), universe, source, bounds, options, sessions, news_source)
    return Job(run, agent, None, outputs, agent_timeout=ns.agent_timeout)


class DaemonCalls:
    """The daemon's model calls, shared by all its runs: one set of call slots per endpoint
    (provider + base URL) and one client-side rate limiter per endpoint, so N runs against one
    provider never have more calls in flight than its bound, nor send more than its rate.

    An endpoint's bound is `--max-concurrency PROVIDER=N`, else `--max-concurrency N`, else the
    first run's `|concurrency=` (None of them: unbounded, no slots); its rate limit the first
    run's `|rpm=`/`|tpm=`. A later run naming another bound or rate for the same endpoint is
    refused at submit (one endpoint has one), never silently given a second pool."""

    def __init__(self, default: int | None = None, per_provider: dict[str, int] | None = None) -> None:
        from kestrel.models.limiter import Limiters
        from kestrel.models.slots import Slots

        self.default = default
        self.per_provider = dict(per_provider or {})
        self.slots = Slots()
        self.limiters = Limiters()

    def share(self, agent: Any) -> None:
        """Give `agent` (a model agent; other agents pass) the endpoint's shared slots and
        limiter in place of its own. Raises ValueError naming a conflicting bound or rate."""
        from dataclasses import replace

        from kestrel.cli.agentspec import is_model_agent
        from kestrel.providers import lookup

        if not is_model_agent(agent):
            return
        config, policy = agent.config, agent.policy
        row = lookup(config.provider)
        url = config.base_url or (row.default_base_url if row is not None else None)
        where = url or config.provider
        own = policy.slots.limit if policy.slots is not None else None
        bound = self.per_provider.get(config.provider, self.default)
        if bound is not None and own is not None and own != bound:
            raise ValueError(f"the daemon bounds calls to {where} at {bound} in flight (--max-concurrency): "
                             f"drop the agent's concurrency={own} or give {bound}")
        limit = bound if bound is not None else own
        slots = None
        if limit is not None:
            try:
                slots = self.slots.get(config.provider, url, limit)
            except ValueError:
                raise ValueError(f"the daemon's runs on {where} are bounded at a concurrency other than {limit}: "
                                 "one endpoint has one (give the same concurrency= in every run)") from None
        limiter = policy.limiter
        if limiter is not None:
            try:
                limiter = self.limiters.get(config.provider, url, limiter.limit)
            except ValueError:
                raise ValueError(f"the daemon's runs on {where} have another rate limit than rpm/tpm of this run: "
                                 "one endpoint has one (give the same rpm=/tpm= in every run)") from None
        agent.policy = replace(policy, slots=slots, limiter=limiter)


class SimulatePlanner:
    """`kestrel.service.daemon.Planner` over `kestrel simulate`'s flags and resolution; `roots`
    are the folders `--data` files are read from (None: none, the sample only); `calls` the
    model calls' slots and limiters every run shares (`DaemonCalls`; None: the defaults)."""

    def __init__(self, roots: Any = None, calls: DaemonCalls | None = None) -> None:
        import threading
        from collections import OrderedDict

        from kestrel.service.host.roots import DataRoots

        self.parser = submit_parser()
        self.roots = roots if roots is not None else DataRoots()
        self.calls = calls if calls is not None else DaemonCalls()
        # (data flags, file identity) -> (MarketData, DataSource, label); a changed file is reloaded
        self._data: OrderedDict[tuple[Any, ...], tuple[Any, Any, str]] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, ns: argparse.Namespace) -> tuple[Any, Any, str]:
        """`kestrel simulate`'s `load_from_args`, its file confined to the roots, cached on the
        data flags and the file's identity (device, inode, size, modification and change times)
        and checked against the SHA-256 the cached data was loaded from (resolutions run on
        worker threads)."""
        from kestrel.cli.dataflags import DATA_FLAGS, load_from_args
        from kestrel.data.source import file_sha256
        from kestrel.service.host.client import file_identity
        from kestrel.service.host.roots import DataRefused

        name = ns.data.strip()
        if name != "sample":
            try:
                ns.data = name = str(self.roots.confine(name))
            except DataRefused as exc:
                raise UsageError(str(exc)) from None
        ident = None if name == "sample" else file_identity(name)
        key = (tuple(getattr(ns, k, None) for k in DATA_FLAGS), ident)
        with self._lock:
            hit = self._data.get(key)
        if hit is not None and ident is not None:
            try:
                same = file_sha256(name) == hit[1].sha256
            except OSError:
                same = False
            if not same:  # rewritten in place with its times kept: load it again
                with self._lock:
                    self._data.pop(key, None)
                hit = None
        if hit is not None:
            return hit
        loaded = load_from_args(ns, "daemon")
        if (ident is not None and file_identity(name) == ident) or name == "sample":
            with self._lock:
                self._data[key] = loaded
                while len(self._data) > 4:
                    self._data.popitem(last=False)
        return loaded

    def parse(self, argv: list[str], cwd: str) -> tuple[dict[str, Any], list[str]]:
        try:
            ns = self.parser.parse_args(argv)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        if not Path(cwd).is_absolute():
            raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
        for flag in ("report", "png"):
            if getattr(ns, flag, None):
                raise ValueError(f"--{flag} is not written by the daemon: export the "
                                 f"run's capture and ledger, then `kestrel report --capture C --ledger L`")
        absolutize(ns, cwd, self.roots)
        check_submit(ns)
        flags: dict[str, Any] = {k: v for k, v in vars(ns).items() if k != "func"}
        try:  # kept with the run: a resumed run plays the file as it was at submit
            content = read_agent_input(ns.agent)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        if content is not None:
            flags[AGENT_FILE] = base64.b64encode(content).decode("ascii")
        return flags, list(argv)

    def _confine_files(self, ns: argparse.Namespace) -> None:
        """Refuse stored flags naming a universe's data, factor, instruments or news file outside
        the roots (`load` confines a single-symbol `--data` itself). Raises ValueError."""
        from kestrel.service.host.roots import DataRefused

        for name in (*OTHER_DATA_FILES, *(("data",) if is_universe_run(ns) else ())):
            value = getattr(ns, name, None)
            if value and value.strip() not in ("", "sample"):
                try:
                    self.roots.confine(value)
                except DataRefused as exc:
                    raise ValueError(f"--{name}: {exc}") from None

    def resolve(self, flags: dict[str, Any]) -> Any:
        from kestrel.service.daemon.runs import Job
        from kestrel.cli.simulate import prepare
        from kestrel.session.runner import SessionError, session_days
        from kestrel.session.schedule import ScheduleError
        from kestrel.session.spec import ResolvedRun, RunSpec

        ns = self.parser.parse_args([])
        for k, v in flags.items():
            if hasattr(ns, k):
                setattr(ns, k, v)
        ns.backend = "asyncio"  # the daemon's own backend runs it
        self._confine_files(ns)  # again at resume: the roots may have narrowed since the submit
        stored = flags.get(AGENT_FILE)
        content = base64.b64decode(stored) if isinstance(stored, str) else None
        if is_universe_run(ns):
            return universe_job(ns, content, self.calls)
        try:
            run = prepare(ns, self.load, agent_content=content)
            self.calls.share(run.agent)
            schedule = session_days(run.data, run.options, run.date, run.days)
        except MissingKeyError as exc:  # the daemon's environment, not the client's shell
            raise ValueError(
                f"missing API key for {exc.agent} in the daemon's environment: {exc.env} is not set where "
                f"the daemon runs (a key set only in the client's shell is never sent); restart the daemon "
                f"with {exc.env} set, or submit with --api-key-env none for a server that needs no key"
            ) from None
        except (UsageError, SessionError, ScheduleError) as exc:
            raise ValueError(str(exc)) from None
        outputs = {k: getattr(ns, k) for k in ("capture", "ledger", "evidence") if getattr(ns, k, None)}
        resolved = ResolvedRun(RunSpec(), run.data, run.options, run.date, run.days, schedule)
        return Job(resolved, run.agent, run.pace, outputs, agent_timeout=ns.agent_timeout)


__all__ = ["AGENT_FILE", "DaemonCalls", "SimulatePlanner", "absolutize", "check_submit", "home_of",
           "is_universe_run", "register", "submit_parser", "universe_job"]
