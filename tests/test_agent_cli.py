"""The CLI side of the agent's contract: `kestrel view` on the session simulate would run,
keys for local servers, a reader that goes away, a `check` batch, presets as detected."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import quotes_csv, run_cli
from kestrel.data import load
from kestrel.data.readers import detect_preset
from model_server import Canned, serve

ROOT = Path(__file__).resolve().parent.parent
OANDA_FILE = "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
PLAN = "PLAN t\nWHEN last > high(30m): BUY 100 MKT STOP -0.6%"


def kestrel(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kestrel", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


# -- kestrel view --date -------------------------------------------------------------------------


def test_view_defaults_to_the_session_simulate_runs_and_warns_on_stale_data(
    capsys: pytest.CaptureFixture[str], shared_data: Path
) -> None:
    oanda = shared_data / OANDA_FILE
    code, out, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(oanda), "--at", "10:30")
    assert code == 0 and "warning" not in err
    assert " session 2014-05-14 " in out.splitlines()[0]  # simulate's default: the last complete session
    code, sim, _ = run_cli(capsys, "simulate", "--data", str(oanda), "--json")
    assert code == 0 and json.loads(sim)["days"][0]["date"] == "2014-05-14"
    # the last session holds only 3 hours of data: its 10:30 shows the evening before, and says so
    code, out, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(oanda), "--at", "10:30",
                             "--date", "2014-05-15")
    assert code == 0 and " session 2014-05-15 " in out.splitlines()[0]
    assert "QUOTE EURUSD 05-15 19:59:56" in out  # the evening before the 10:30 is dated
    assert ("kestrel view: warning: the latest tick at or before the 10:25:00 cutoff is 05-15 19:59:56, "
            "14h25m earlier") in err
    assert "kestrel view: warning: partial session 2014-05-15" in err
    code, _, err = run_cli(capsys, "view", "VIEW v: quote", "--data", str(oanda), "--date", "2014-06-01")
    assert code == 2 and err.splitlines()[-1].startswith("kestrel view: no session on 2014-06-01 in the data; sessions: ")


def test_view_states_the_rules_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "view", "VIEW v: quote", "--at", "10:30", "--maxpos", "300",
                           "--session-maxloss", "500", "--latency", "50")
    lines = out.splitlines()
    assert code == 0 and lines[1:4] == [
        "RULES SAMPLE tick 0.01 mult 1 USD lot 1",
        "bounds maxpos 300 maxloss 1000 maxorders 50 session_maxloss 500",
        "friction latency 50ms; eod flatten",
    ]


# -- no key for a local server -------------------------------------------------------------------


def _auth(srv_headers: dict[str, str]) -> str:
    return {k.lower(): v for k, v in srv_headers.items()}.get("authorization", "")


def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serve(lambda path, body: Canned(PLAN)) as srv:
        code, out, err = run_cli(capsys, "simulate", "--agent", "openai:qwen3-8b", "--base-url", srv.openai_url,
                                 "--json")
        assert code == 0, err
        assert _auth(srv.recorded()[0].headers) == "Bearer not-needed"
    # a remote endpoint still needs one, and the message names the way out
    code, out, err = run_cli(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", "https://api.example.com/v1")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "set the environment variable OPENAI_API_KEY" in err and "--api-key-env none" in err


def test_api_key_env_none_sends_no_key_even_when_one_is_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-not-for-this-server")
    with serve(lambda path, body: Canned(PLAN)) as srv:
        code, _, err = run_cli(capsys, "simulate", "--agent", "openai:qwen3-8b", "--base-url", srv.openai_url,
                               "--api-key-env", "none", "--json")
        assert code == 0, err
        assert _auth(srv.recorded()[0].headers) == "Bearer not-needed"
        code, _, err = run_cli(capsys, "simulate", "--agent", "openai:qwen3-8b", "--base-url", srv.openai_url,
                               "--json")
        assert code == 0, err
        assert _auth(srv.recorded()[-1].headers) == "Bearer sk-secret-not-for-this-server"  # set: it is used


# -- a reader that goes away ----------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ("simulate", "--days", "2"),
    ("simulate", "--json"),
    ("panes",),
    ("view", "VIEW v: quote, bars(5m, 60)"),
    ("--help",),
])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv: tuple[str, ...]) -> None:
    proc = kestrel(*argv)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte: every write meets EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == ""  # no "Broken pipe", no "Exception ignored", no traceback


def test_ctl_runs_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = subprocess.Popen([sys.executable, "-m", "kestrel", "daemon", "--home", str(home)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([sys.executable, "-m", "kestrel", "ctl", "--home", str(home), "ping"], cwd=ROOT,
                             capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.2)
        proc = kestrel("ctl", "--home", str(home), "runs")
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0 and err == ""
    finally:
        subprocess.run([sys.executable, "-m", "kestrel", "ctl", "--home", str(home), "shutdown"], cwd=ROOT,
                       capture_output=True)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


# -- presets as detected ---------------------------------------------------------------------------


def test_presets_sharing_columns_are_told_apart_by_the_file_name(tmp_path: Path) -> None:
    fxcm = quotes_csv(tmp_path / "my_fxcm_ticks.csv", 1, seed=3)
    plain = quotes_csv(tmp_path / "ticks.csv", 1, seed=3)
    assert detect_preset(fxcm) == "fxcm" and detect_preset(plain) == "oanda"
    report = load(fxcm).report
    assert (report.preset, report.preset_detected) == ("fxcm", True)
    assert "preset fxcm detected" in report.notes()[0]
    named = load(plain, "fxcm").report  # a preset named on the command line is not "detected"
    assert (named.preset, named.preset_detected) == ("fxcm", False)
    assert "detected" not in named.notes()[0]


def test_the_capture_records_the_preset_as_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = quotes_csv(tmp_path / "lean_fxcm_sample.csv", 3, seed=5)
    capture = tmp_path / "run.jsonl"
    code, _, err = run_cli(capsys, "simulate", "--data", str(data), "--capture", str(capture), "--json")
    assert code == 0, err
    header = json.loads(capture.read_text().splitlines()[0])
    assert header["source"]["preset"] == "fxcm"
    assert "preset fxcm detected" in err


# -- the daemon's missing key ----------------------------------------------------------------


def test_a_key_missing_where_the_daemon_runs_is_named_as_the_daemons(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    from kestrel.cli.daemon import SimulatePlanner

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the daemon's environment
    planner = SimulatePlanner()
    flags, _ = planner.parse(["--agent", "openai:gpt-5.1"], str(tmp_path))
    with pytest.raises(ValueError) as err:
        planner.resolve(flags)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("missing API key for openai:gpt-5.1 in the daemon's environment: OPENAI_API_KEY "
                              "is not set where the daemon runs (a key set only in the client's shell is never sent)")
    assert "restart the daemon with OPENAI_API_KEY set" in message
    code = run_cli_simulate_missing_key()
    assert code.startswith("kestrel simulate: missing API key for openai:gpt-5.1: set the environment variable "
                           "OPENAI_API_KEY")  # the CLI's own run says the shell's variable, as before


def run_cli_simulate_missing_key() -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run([sys.executable, "-m", "kestrel", "simulate", "--agent", "openai:gpt-5.1"], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    return out.stderr.strip().splitlines()[-1]
