"""The HTML report of a fixed ledger on the bundled sample, byte for byte against a reviewed
golden file (tests/golden/run_report.html). The ledger is written by hand, so the golden file
moves only when the report itself changes; regenerate it with KESTREL_UPDATE_GOLDEN=1 and
review the diff."""

from __future__ import annotations

import os
from pathlib import Path

from kestrel.data import load_sample
from kestrel.engine.ledger import (
    Armed,
    Cancelled,
    Disarmed,
    Filled,
    LedgerEvent,
    OrderPlaced,
    OrderRejected,
    PositionChanged,
)
from kestrel.report import DayInput, RunHeader, TurnRow, build, data_sha256
from kestrel.report.html import render_run

GOLDEN = Path(__file__).parent / "golden" / "run_report.html"


def _report() -> str:
    data = load_sample()
    s = data.sessions[-1]
    t = data.ticks
    lo = t.index_at(s.open_ns, side="left")

    def at(i: int) -> int:
        return int(t.ts[lo + i])

    ev: list[LedgerEvent] = [
        Armed(0, s.open_ns, "orb", 2, s.close_ns),
        OrderPlaced(1800, at(1800), 1, "orb", "entry", "buy", 100, "mkt", None, None),
        Filled(1801, at(1801), 1, "buy", 100, 189.50, 1.0),
        PositionChanged(1801, at(1801), 100, 189.50, 0.0),
        OrderPlaced(1801, at(1801), 2, "orb", "stop", "sell", 100, "stp", 188.40, 1),
        OrderPlaced(1801, at(1801), 3, "orb", "target", "sell", 100, "lmt", 191.20, 1),
        OrderRejected(2400, at(2400), "orb", 1, "position would reach 200, over maxpos 100"),
        Filled(9000, at(9000), 3, "sell", 100, 191.20, 1.0),
        PositionChanged(9000, at(9000), 0, None, 170.0),
        Cancelled(9000, at(9000), 2, "oco"),
        Disarmed(20000, at(20000), "orb", "maxloss 400 breached"),
    ]
    turns = [TurnRow(s.date.isoformat(), "OPEN", "PLAN", "orb", "PLAN orb RISK maxpos 100 maxloss 400\n"
                     "WHEN last > high(30m): BUY 100 MKT STOP -0.6% TARGET +0.9%", None, 2, 1800, 0.0123,
                     "armed orb"),
             TurnRow(s.date.isoformat(), "11:00", "STANDDOWN", None, None, "spread too wide", 1, 600, 0.004,
                     "stood down: spread too wide")]
    header = RunHeader(data.symbol, "sample", data_sha256("sample", data), "openai:gpt-4o", "gpt-4o",
                       (s.date.isoformat(),), ("OPEN", "11:00"))
    return render_run(build(header, [DayInput(s, ev, turns)], data, risk_capital=400.0))


def test_the_report_matches_the_golden_file() -> None:
    html = _report()
    assert html == _report()  # no clock, no random id
    if os.environ.get("KESTREL_UPDATE_GOLDEN"):
        GOLDEN.write_text(html, "utf-8")
    assert html == GOLDEN.read_text("utf-8")
