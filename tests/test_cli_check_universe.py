"""`kestrel check --data UNIVERSE` / `--symbols A,B`: each file checked as one reply of a universe
turn. Differential: check accepts a document exactly when a universe run (`kestrel simulate
--agent fixed:FILE`) arms it, and the run's refusal carries check's message; diagnostics keep
`kestrel check`'s `file:line:col: message` lines and `--json` shape; without the flags a
check is today's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from cli_universe_support import long_csv

TURNS = {
    "module": 'PLAN a ON AAA FOR 5d\nWHEN pos == 0 AND BBB.chg(1d) > 0 AND last > sma(last, 20, 1d): BUY 10 MKT\n'
              'PLAN b ON BBB\nWHEN pos == 0: SELL 3 MKT\nSTANDDOWN ON CCC "no view"\n',
    "unknown_on": "PLAN a ON AAA\nWHEN pos == 0: BUY 10 MKT\nPLAN b ON XYZ\nWHEN pos == 0: BUY 1 MKT\n",
    "unknown_read": "PLAN a ON AAA\nWHEN pos == 0 AND QQQ.chg(1d) > 0: BUY 10 MKT\n",
    "no_on": "PLAN a\nWHEN pos == 0: BUY 10 MKT\n",
    "two_on_one": "PLAN a ON AAA\nWHEN pos == 0: BUY 1 MKT\nPLAN b ON AAA\nWHEN pos == 0: SELL 1 MKT\n",
    "standdown_unknown": 'STANDDOWN ON ZZZ "x"\n',
    "fraction_on_whole_lots": "PLAN a ON AAA\nWHEN pos == 0: BUY 0.5 MKT\n",
    "fraction_on_fractional_lots": "PLAN a ON BBB\nWHEN pos == 0: BUY 0.5 MKT\n",
    "pass": "PASS\n",
}
INVALID = {"unknown_on", "unknown_read", "no_on", "two_on_one", "standdown_unknown", "fraction_on_whole_lots"}


@pytest.fixture
def universe(tmp_path: Path) -> tuple[Path, Path]:
    instruments = tmp_path / "instruments.csv"
    instruments.write_text("symbol,lot_size\nBBB,0.01\n")
    return long_csv(tmp_path / "u.csv"), instruments


@pytest.mark.parametrize("name", sorted(TURNS))
def test_check_accepts_what_a_run_arms(name: str, universe: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    data, instruments = universe
    doc = tmp_path / f"{name}.kes"
    doc.write_text(TURNS[name])
    code, out, err = run_cli(capsys, "check", "--data", str(data), "--instruments", str(instruments), "--json",
                             str(doc))
    (entry,) = json.loads(out)
    assert entry["ok"] is (code == 0) and code in (0, 1)
    ran, summary, why = run_cli(capsys, "simulate", "--data", str(data), "--instruments", str(instruments),
                                "--agent", f"fixed:{doc}", "--json")
    assert ran == 0, why
    (turn,) = json.loads(summary)["turns"]
    refused = "invalid reply" in turn["applied"]
    assert refused is (name in INVALID) and (code == 1) is refused, turn["applied"]
    if refused:
        (diag,) = entry["diagnostics"]
        assert " ".join(diag["message"].split()) in " ".join(turn["applied"].split())
        assert err.splitlines() == [f"{doc}:{diag['line']}:{diag['column']}: {diag['message']}"
                                    + (f" (hint: {diag['hint']})" if diag["hint"] else "")]
    else:
        assert err == "" and entry["diagnostics"] == []


def test_a_plan_on_a_symbol_outside_the_universe_names_its_symbols(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "m.kes"
    doc.write_text(TURNS["unknown_on"])
    code, out, err = run_cli(capsys, "check", "--symbols", "AAA,BBB,CCC", str(doc))
    assert code == 1 and out == ""
    assert err.splitlines() == [f"{doc}:3:1: plan b is ON XYZ: no symbol XYZ in this session "
                                "(its symbols are AAA, BBB, CCC)"]


def test_the_universes_limits_not_one_symbols(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A module of plans and a run-long window: refused by a plain check (one statement of one
    symbol, windows within a session), accepted as a universe turn."""
    doc = tmp_path / "m.kes"
    doc.write_text(TURNS["module"])
    code, _, err = run_cli(capsys, "check", str(doc))
    assert code == 1 and err
    code, _, err = run_cli(capsys, "check", "--symbols", "AAA,BBB,CCC", str(doc))
    assert (code, err) == (0, "")
    many = tmp_path / "many.kes"
    many.write_text("".join(f"PLAN p{i} ON S{i}\nWHEN pos == 0: BUY 1 MKT\n" for i in range(20)))
    assert run_cli(capsys, "check", "--symbols", ",".join(f"S{i}" for i in range(20)), str(many))[0] == 0
    assert run_cli(capsys, "check", "--symbols", ",".join(f"S{i}" for i in range(19)), str(many))[0] == 1


def test_symbols_alone_take_the_lot_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "m.kes"
    doc.write_text("PLAN a ON BTC\nWHEN pos == 0: BUY 0.0003 MKT\n")
    assert run_cli(capsys, "check", "--symbols", "BTC,ETH", str(doc))[0] == 1
    assert run_cli(capsys, "check", "--symbols", "BTC,ETH", "--lot-size", "0.0001", str(doc))[:3:2] == (0, "")


def test_a_view_names_symbols_of_the_universe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.kes", tmp_path / "bad.kes"
    good.write_text("VIEW v: quote(AAA), watchlist\n")
    bad.write_text("# look first\nVIEW v: quote(ZZZ), watchlist\n")
    code, out, err = run_cli(capsys, "check", "--symbols", "AAA,BBB", "--json", str(good), str(bad))
    assert code == 1
    assert [e["ok"] for e in json.loads(out)] == [True, False]
    assert err.splitlines() == [f"{bad}:2:1: VIEW v: quote: no symbol 'ZZZ' in this session; symbols: AAA, BBB"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--data", "{data}", "--lot-size", "0.01"], "drop --lot-size"),
    (["--instruments", "x.csv"], "give it with --data"),
    (["--data", "{tmp}/nowhere.csv"], "nowhere.csv"),
    (["--data", "{data}", "--symbols", "AAA,QQQ"], "QQQ"),
    (["--symbols", " , "], "--symbols is empty"),
])
def test_bad_flags_are_one_line_exit_2(argv: list[str], message: str, universe: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "m.kes"
    doc.write_text("PASS\n")
    flags = [a.format(data=universe[0], tmp=tmp_path) for a in argv]
    code, out, err = run_cli(capsys, "check", *flags, str(doc))
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("kestrel check: ") and message in line


def test_the_stockbench_universe(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
    doc = tmp_path / "m.kes"
    doc.write_text("PLAN a ON AAPL\nWHEN pos == 0 AND MSFT.chg(1d) > 0: BUY $2000 MKT\nSTANDDOWN ON SPY\n")
    code, _, err = run_cli(capsys, "check", "--data", str(path), str(doc))
    assert code == 1
    assert err.splitlines()[-1].startswith(f"{doc}:3:1: STANDDOWN ON SPY: no symbol SPY in this session "
                                           "(its symbols are AAPL, AMGN,")


@pytest.mark.parametrize(("text", "armed"), [
    ("PLAN a ON SYM1\nWHEN pos == 0 AND SYM2.chg(1d) > 0: BUY 10 MKT\n", True),
    ('PLAN a ON SYM2\nWHEN pos == 0: BUY 0.5 MKT\nSTANDDOWN ON SYM3 "later"\n', None),
    ("PLAN a ON AAA\nWHEN pos == 0: BUY 10 MKT\n", False),
    ("PLAN a ON SYM1\nWHEN pos == 0 AND BBB.chg(1d) > 0: BUY 10 MKT\n", False),
])
def test_blind_checks_the_aliases_a_blind_run_reads(text: str, armed: bool | None, universe: tuple[Path, Path],
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--blind`: the reply a blind run's agent writes, over the aliases (each alias's lot its
    real symbol's); accepted exactly when a blind run arms it (None: as the lots decide)."""
    data, instruments = universe
    doc = tmp_path / "m.kes"
    doc.write_text(text)
    code, _, err = run_cli(capsys, "check", "--data", str(data), "--instruments", str(instruments), "--blind",
                           str(doc))
    ran, summary, why = run_cli(capsys, "simulate", "--data", str(data), "--instruments", str(instruments),
                                "--blind", "--agent", f"fixed:{doc}", "--json")
    assert ran == 0, why
    (turn,) = json.loads(summary)["turns"]
    refused = "invalid reply" in turn["applied"]
    assert (code == 1) is refused and code in (0, 1), (err, turn["applied"])
    if armed is not None:
        assert refused is not armed
    for real in ("AAA", "BBB", "CCC"):
        assert real not in err or real in text
