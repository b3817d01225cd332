"""Helpers for the security tests: a real `kestrel mcp --http` server, its clients, a second
local user (the attacker) where the machine has one, and the heavy plan a hostile client sends.

Everything is loopback only and every loop is bounded. The second user is `nobody` (uid 65534)
when the tests run as root: no account is created or changed; the attacker's scripts run with
the system's own Python (stdlib only), which that user can execute. Elsewhere the tests that
need a second user skip, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_support import ROOT, call, client, free_port, refusal, wait_listening

NOBODY = 65534
TOKEN_A = "a" * 20 + "-token-of-client-a-0123456789"
TOKEN_B = "b" * 20 + "-token-of-client-b-0123456789"
RULES = "\n".join(
    f"WHEN last > sma(last, {5 + i}, 1m) AND spread < 0.05: BUY 1 MKT STOP -0.0{1 + i % 9} TARGET +0.0{1 + i % 9}"
    for i in range(32)
)
HEAVY_PLAN = "PLAN heavy RISK maxpos 100 maxloss 100000\n" + RULES + "\n"
"""32 rules: the most a plan may have."""
CHECKPOINTS = ",".join(f"{h:02d}:{m:02d}" for h in range(10, 16) for m in range(0, 60, 10))
"""36 checkpoints, 10 minutes apart."""


def token_file(folder: Path, *tokens: str) -> Path:
    path = folder / "tokens"
    path.write_text("".join(f"{t}\n" for t in tokens))
    path.chmod(0o600)
    return path


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    errlog: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        return self.errlog.read_text()

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def mcp_server(folder: Path, *args: str, backend: str = "asyncio", tokens: tuple[str, ...] = (TOKEN_A, TOKEN_B)
               ) -> Iterator[Server]:
    """`kestrel mcp --http PORT --token-file ...` as a subprocess, stopped at the end."""
    port = free_port()
    errlog = folder / f"mcp-{port}.err"
    with open(errlog, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kestrel", "mcp", "--http", str(port), "--backend", backend,
             "--token-file", str(token_file(folder, *tokens)), *args],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True,
        )
    try:
        wait_listening(proc, port)
        yield Server(proc, port, errlog)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def system_python() -> str | None:
    """A Python another user can run (the venv's may live under a private home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3")


def second_user() -> int:
    """The uid of another local user the tests may run processes as, or skip."""
    if os.getuid() != 0:
        pytest.skip("needs a second local user: run the suite as root (it then uses uid 65534, nobody)")
    python = system_python()
    if python is None:
        pytest.skip("no system Python for the second user to run")
    probe = subprocess.run([python, "-c", "import os; print(os.getuid())"], user=NOBODY, group=NOBODY,
                           capture_output=True, text=True, timeout=30, cwd="/")
    if probe.returncode != 0 or probe.stdout.strip() != str(NOBODY):
        pytest.skip(f"cannot run a process as uid {NOBODY}: {probe.stderr.strip()[:200]}")
    return NOBODY


def run_as(uid: int, script: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`script` (stdlib Python) run by the system's Python as `uid`, from a folder it can read."""
    python = system_python()
    assert python is not None
    folder = Path(tempfile.mkdtemp(prefix="kestrel-attacker-"))
    try:
        folder.chmod(0o755)
        path = folder / "attack.py"
        path.write_text(script)
        path.chmod(0o644)
        return subprocess.run([python, str(path), *args], user=uid, group=uid, capture_output=True, text=True,
                              timeout=timeout, cwd=str(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = [
    "CHECKPOINTS",
    "HEAVY_PLAN",
    "NOBODY",
    "ROOT",
    "TOKEN_A",
    "TOKEN_B",
    "Server",
    "UTC_CHECKPOINTS",
    "call",
    "client",
    "long_trades_csv",
    "free_port",
    "mcp_server",
    "refusal",
    "run_as",
    "second_user",
    "system_python",
    "token_file",
    "wait_listening",
]


def long_trades_csv(path: Path, sessions: int = 25) -> Path:
    """A trades CSV (`pyalgotrade_trades`: unix seconds, price, amount) of `sessions` generated
    days, one trade a second from 13:30 to 20:00 UTC: a month of data for a long run."""
    import numpy as np

    from kestrel.data.synthetic import SyntheticSpec, generate

    data = generate(SyntheticSpec(sessions=sessions), 7)
    t = data.ticks
    seconds = t.ts // 1_000_000_000
    lines = np.char.add(np.char.add(np.char.add(seconds.astype(str), ","), np.char.mod("%.2f", t.last)), ",100")
    path.write_text("unix_s,price,amount\n" + "\n".join(lines.tolist()) + "\n")
    return path


UTC_CHECKPOINTS = ",".join(f"{h:02d}:{m:02d}" for h in range(14, 20) for m in range(0, 60, 10))
"""36 checkpoints of a UTC session, 10 minutes apart."""
