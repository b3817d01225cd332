"""`kestrel simulate`'s execution-model and operator-bound flags: they
reach the engine, modes can set them, the report and `--json` show the execution model
(frictionless runs say so), and `replay` reproduces a run made with them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.cli.errors import UsageError
from kestrel.cli.execution import engine_config
from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Filled, Ledger, OrderPlaced, OrderRejected
from kestrel.session.profiles import load_modes, lookup_mode
from cli_helpers import run_cli


_run = run_cli


def test_a_plain_run_says_it_is_frictionless(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "simulate")
    assert code == 0, err
    assert "Execution: frictionless" in out
    # the default maxpos scales with the instrument: 100 x maxloss = 100,000 of notional at the
    # sample's first quote (179.96 / 180.03, mid 179.995) is 555 shares, 550 at two figures
    assert "maxpos 550, maxloss 1000 per plan, session maxloss none" in out
    code, out, err = _run(capsys, "simulate", "--json")
    ex = json.loads(out)["execution"]
    assert ex["frictionless"] is True and ex["slippage_ticks"] == 0 and ex["session_maxloss"] is None


def test_friction_flags_reach_the_engine_and_replay(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plain, rough = tmp_path / "plain.jsonl", tmp_path / "rough.jsonl"
    cap = tmp_path / "cap.jsonl"
    assert _run(capsys, "simulate", "--ledger", str(plain))[0] == 0
    code, out, err = _run(capsys, "simulate", "--json", "--slippage", "2", "--fee-per-unit", "0.01",
                          "--fee-per-order", "1.5", "--latency", "250", "--ledger", str(rough),
                          "--capture", str(cap))
    assert code == 0, err
    ex = json.loads(out)["execution"]
    assert (ex["frictionless"], ex["latency_ms"], ex["slippage_ticks"], ex["fee_per_unit"],
            ex["fee_per_order"]) == (False, 250.0, 2.0, 0.01, 1.5)
    p_fills = [e for e in Ledger.from_jsonl(plain.read_bytes()).events if isinstance(e, Filled)]
    r_events = Ledger.from_jsonl(rough.read_bytes()).events
    r_fills = [e for e in r_events if isinstance(e, Filled)]
    assert p_fills and r_fills
    # the market entry fills 2 ticks (0.02) worse, with a fee of 1.5 + 0.01 x qty
    roles = {o.id: o.role for o in r_events if isinstance(o, OrderPlaced)}
    entry = next(f for f in r_fills if roles[f.id] == "entry")
    assert entry.fee == round(1.5 + 0.01 * entry.qty, 2)
    assert all(f.fee == 0.0 for f in p_fills)
    # replay reads the execution model from the capture: the same ledger, no flags needed
    code, _, err = _run(capsys, "replay", str(cap), "--expect-ledger", str(rough))
    assert code == 0 and "ledger identical" in err


def test_operator_bounds_bind_from_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    led = tmp_path / "l.jsonl"
    # the baseline sizes 256 shares on its own; told the operator's bounds, it stays within them
    code, out, err = _run(capsys, "simulate", "--maxpos", "50", "--maxloss", "300",
                          "--session-maxloss", "350", "--ledger", str(led))
    assert code == 0, err
    assert "maxpos 50, maxloss 300 per plan, session maxloss 350" in out
    assert "RISK maxpos 50 maxloss 300" in out
    events = Ledger.from_jsonl(led.read_bytes()).events
    fills = [e for e in events if isinstance(e, Filled)]
    assert fills and all(f.qty <= 50 for f in fills)
    assert not any(isinstance(e, OrderRejected) for e in events)


@pytest.mark.parametrize(("argv", "message"), [
    (("--maxpos", "0"), "--maxpos must be a finite number > 0, got 0"),
    (("--maxloss", "-5"), "--maxloss must be a finite number > 0, got -5"),
    (("--session-maxloss", "inf"), "--session-maxloss must be a finite number > 0, got inf"),
    (("--slippage", "nan"), "--slippage must be a finite number >= 0, got nan"),
    (("--fee-per-unit", "-0.01"), "--fee-per-unit must be a finite number >= 0, got -0.01"),
    (("--latency", "-1"), "--latency must be a finite number >= 0, got -1"),
])
def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str) -> None:
    code, out, err = _run(capsys, "simulate", *argv)
    assert code == 2 and out == ""
    assert err.strip() == f"kestrel simulate: {message}"


MODES = """
[modes.rough]
agent = "baseline"
latency_ms = 50
slippage_ticks = 1
fee_per_unit = 0.005
fee_per_order = 1
maxpos = 300
maxloss = 500
session_maxloss = 800
"""


def _args(**kw: object) -> argparse.Namespace:
    base = dict(maxpos=None, maxloss=None, session_maxloss=None, latency=None, slippage=None,
                fee_per_unit=None, fee_per_order=None)
    return argparse.Namespace(**{**base, **kw})


def test_a_mode_sets_the_execution_model_and_flags_win() -> None:
    mode = lookup_mode("rough", load_modes(MODES))
    cfg = engine_config(_args(), mode)
    assert cfg == EngineConfig(maxpos=300, maxloss=500, session_maxloss=800, latency_ns=50_000_000,
                               slippage_ticks=1, fee_per_unit=0.005, fee_per_order=1)
    flagged = engine_config(_args(slippage=0.0, maxpos=100), mode)
    assert (flagged.slippage_ticks, flagged.maxpos, flagged.fee_per_unit) == (0.0, 100, 0.005)
    assert engine_config(_args(), None) == EngineConfig()


def test_a_bad_mode_value_is_refused_naming_the_mode_and_key() -> None:
    from kestrel.session.profiles import ProfileError

    with pytest.raises(ProfileError, match="mode 'bad': slippage_ticks must be a finite number >= 0, got -1"):
        load_modes('[modes.bad]\nslippage_ticks = -1\n')
    with pytest.raises(ProfileError, match="mode 'bad': maxpos must be a finite number > 0, got 0"):
        load_modes('[modes.bad]\nmaxpos = 0\n')


def test_end_of_day_carry_from_the_cli_holds_over_two_days(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "hold.kes"
    plan.write_text("PLAN hold\nWHEN pos == 0: BUY 10 MKT\n")
    code, out, err = _run(capsys, "simulate", "--json", "--days", "2", "--agent", f"fixed:{plan}",
                          "--end-of-day", "carry")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["execution"]["end_of_day"] == "carry"
    d1, d2 = doc["days"]
    assert (d1["fills"], d1["carried_in"], d1["carried_out"]) == (1, 0, 10)
    assert (d2["fills"], d2["carried_in"], d2["carried_out"]) == (0, 10, 10)
    mode = lookup_mode("hold", load_modes('[modes.hold]\nend_of_day = "carry"\n'))
    assert engine_config(_args(end_of_day=None), mode).end_of_day == "carry"
