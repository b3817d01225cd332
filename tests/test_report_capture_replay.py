"""`kestrel report --capture` without `--ledger` replays the capture as it was run: under an arm
latency each turn is armed after its recorded delay and a blind capture runs blind, so the
report's metrics and equity are those of the run's own ledger (the report given `--ledger`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.cli import main

ORB = ("PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
       "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n")


def _figures(html: Path) -> str:
    """The report's metrics table and equity chart (the part computed from the ledger)."""
    text = html.read_text()
    start = text.index("<h2>Metrics</h2>")
    return text[start:text.index("<h2>Session ", start)]


def _report(tmp: Path, name: str, *flags: str) -> tuple[str, str]:
    """(the figures replayed from the capture alone, the figures of the run's own ledger)."""
    plan = tmp / "orb.kes"
    plan.write_text(ORB)
    cap, led = tmp / f"{name}.capture", tmp / f"{name}.ledger"
    assert main(["simulate", "--agent", f"fixed:{plan}", "--checkpoints", "11:00", "--days", "2", "--backend",
                 "direct", "--capture", str(cap), "--ledger", str(led), *flags]) == 0
    assert main(["report", "--capture", str(cap), "-o", str(tmp / f"{name}.replayed.html")]) == 0
    assert main(["report", "--capture", str(cap), "--ledger", str(led), "-o", str(tmp / f"{name}.given.html")]) == 0
    return _figures(tmp / f"{name}.replayed.html"), _figures(tmp / f"{name}.given.html")


@pytest.mark.parametrize("flags", [("--arm-latency", "5400"), ("--arm-latency", "5400", "--blind")])
def test_a_report_replays_the_capture_as_it_was_run(flags: tuple[str, ...], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    replayed, given = _report(tmp_path, "late", *flags)
    assert replayed == given
    plain, _ = _report(tmp_path, "plain")
    assert plain != given  # the arm latency changes the run: a replay that dropped it would differ
