"""A universe submitted to the daemon (a real subprocess) through `kestrel ctl submit`: refused
with one line naming where universes run and how to pick one member (a long-format file without
`--symbol`, or any portfolio flag such as `--symbols`); with `--symbol` one member runs to the
same ledger as `kestrel simulate`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_support import DaemonProcess
from kestrel.cli import main

PLAN = "PLAN a UNTIL 15:45 RISK maxpos 10 maxloss 300\nWHEN pos == 0: BUY 10 MKT\n"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path / "home", backend="asyncio", roots=(tmp_path,))
    d.start()
    yield d
    d.stop()


def test_a_universe_is_refused_and_one_member_runs(daemon: DaemonProcess, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "u.csv"
    rows = ["date,symbol,open,high,low,close,volume"]
    for i, d in enumerate(["2024-03-04", "2024-03-05", "2024-03-06"]):
        for sym, base in (("AAA", 50.0), ("BBB", 20.0)):
            o = base + i
            rows.append(f"{d},{sym},{o:.2f},{o + 1:.2f},{o - 1:.2f},{o + 0.5:.2f},1000")
    data.write_text("\n".join(rows) + "\n")
    plan = tmp_path / "a.kes"
    plan.write_text(PLAN)
    home = str(daemon.home)
    capsys.readouterr()
    for extra in ((), ("--symbols", "AAA,BBB"), ("--symbol", "AAA", "--capital", "5000")):
        code = main(["ctl", "--home", home, "submit", "--data", str(data), "--agent", f"fixed:{plan}", *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0 and len(err) == 1, (extra, err)
        assert "universes run through `kestrel simulate` and `kestrel sweep`" in err[0] and "--symbol SYM" in err[0]
    flags = ["--data", str(data), "--symbol", "BBB", "--agent", f"fixed:{plan}", "--days", "3"]
    assert main(["ctl", "--home", home, "submit", *flags]) == 0
    run = capsys.readouterr().out.splitlines()[-1]
    assert main(["ctl", "--home", home, "wait", run, "--timeout", "60"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    assert main(["ctl", "--home", home, "export", run, "--ledger", str(out / "l"), "--capture", str(out / "c")]) == 0
    assert main(["simulate", *flags, "--ledger", str(out / "ref"), "--json"]) == 0
    assert (out / "l").read_bytes() == (out / "ref").read_bytes()
    assert b'"event":"fill"' in (out / "l").read_bytes()
