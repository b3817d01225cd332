"""`kestrel report --capture C --ledger L` takes only C's own ledger: the capture's header
records its ledger's SHA-256; another run's ledger, an empty file or a capture without the
checksum is refused (exit 2) with both checksums named, never reported."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kestrel.cli import main

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")


def _simulate(tmp_path: Path, name: str, *agent: str) -> tuple[Path, Path]:
    cap, led = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.ledger.jsonl"
    assert main(["simulate", "--checkpoints", "11:00", *agent, "--capture", str(cap), "--ledger", str(led),
                 "--json"]) == 0
    return cap, led


def _report(capsys: pytest.CaptureFixture[str], cap: Path, led: Path, out: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["report", "--capture", str(cap), "--ledger", str(led), "-o", str(out)])
    return code, capsys.readouterr().err


def test_report_refuses_a_ledger_that_is_not_the_captures(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    cap, led = _simulate(tmp_path, "base")
    _, other = _simulate(tmp_path, "orb", "--agent", f"fixed:{ORB}")
    recorded = json.loads(cap.read_bytes().splitlines()[0])["ledger_sha256"]
    assert recorded == hashlib.sha256(led.read_bytes()).hexdigest()
    html = tmp_path / "r.html"

    code, err = _report(capsys, cap, other, html)
    assert code == 2 and not html.exists()
    assert hashlib.sha256(other.read_bytes()).hexdigest() in err and recorded in err
    assert "not this capture's ledger" in err and "Traceback" not in err

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, err = _report(capsys, cap, empty, html)
    assert code == 2 and hashlib.sha256(b"").hexdigest() in err and recorded in err

    code, err = _report(capsys, cap, led, html)  # its own ledger: reported
    assert code == 0, err
    assert html.exists()


def test_report_refuses_a_ledger_for_a_capture_without_its_checksum(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    cap, led = _simulate(tmp_path, "base")
    lines = cap.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["ledger_sha256"] = None  # what an interrupted run's capture holds
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    html = tmp_path / "r.html"
    code, err = _report(capsys, bare, led, html)
    assert code == 2 and not html.exists()
    assert "records no ledger checksum" in err and "drop --ledger" in err
