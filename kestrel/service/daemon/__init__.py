"""The Kestrel daemon: the session host behind an owner-only Unix socket, with a SQLite store
and crash recovery (`kestrel daemon`, `kestrel ctl`; see docs/daemon.md).

- `home`: the home folder, the single-instance lock, the socket path, the log;
- `store`: the database (WAL, synchronous=FULL, versioned schema, integrity check);
- `writer`: the one writer, with group commit (callers resume once their records are durable);
- `runs`: runs on the session host, committed as they happen, resumed after a crash;
- `server`: the socket, the protocol (`kestrel.service.daemon.protocol`), signals and shutdown.
"""

from kestrel.service.daemon.home import Home, HomeError, Lock, configure_logs, default_home
from kestrel.service.daemon.runs import Job, Planner, Refusal, Runs
from kestrel.service.daemon.server import Daemon, peer_uid, serve_daemon
from kestrel.service.daemon.store import SCHEMA_VERSION, Store, StoreError
from kestrel.service.daemon.writer import Writer, open_writer

__all__ = [
    "SCHEMA_VERSION",
    "Daemon",
    "Home",
    "HomeError",
    "Job",
    "Lock",
    "Planner",
    "Refusal",
    "Runs",
    "Store",
    "StoreError",
    "Writer",
    "configure_logs",
    "default_home",
    "open_writer",
    "peer_uid",
    "serve_daemon",
]
