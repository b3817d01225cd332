"""The HTML report: same run, same bytes; self-contained and offline (checked by parsing);
the metrics named; `kestrel report` from a capture with and without its ledger; PNG export."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared_paths import SHARED_DATA
from html_pages import assert_offline
from kestrel.cli import main

FX = SHARED_DATA / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_report_bytes_are_deterministic_offline_and_name_the_metrics(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b, cap, led = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    _run(capsys, "simulate", "--checkpoints", "11:00", "--report", str(a), "--capture", str(cap),
         "--ledger", str(led), "--json")
    _run(capsys, "simulate", "--checkpoints", "11:00", "--report", str(b), "--backend", "trio", "--json")
    html = a.read_text()
    assert a.read_bytes() == b.read_bytes()
    page = assert_offline(html)
    assert page.tags.count("svg") >= 2 and "polyline" in page.tags and "polygon" in page.tags
    text = " ".join(page.text)
    for name in ("net PnL", "return on risk capital", "Sharpe (annualized)", "Sortino (annualized)",
                 "max drawdown (marked per tick)", "max drawdown at", "win rate", "profit factor",
                 "average win", "average loss", "exposure", "turnover", "fees", "rejections", "disarms",
                 "tokens", "buy-and-hold", "flat", "Round trips", "Rejections and disarms",
                 "Turns per ordinal", "SHA-256", "STOP"):
        assert name in text, name
    # the report from the capture alone (replayed) is the simulate report, byte for byte
    c = tmp_path / "c.html"
    out = _run(capsys, "report", "--capture", str(cap), "-o", str(c))
    assert c.read_bytes() == a.read_bytes()
    assert "equity " in out and "sharpe" in out and "max dd" in out
    # with the ledger: nothing is re-run; the metrics are the same (tokens are unknown to a ledger)
    d = tmp_path / "d.html"
    _run(capsys, "report", "--capture", str(cap), "--ledger", str(led), "-o", str(d))
    metrics = [h.split("<h2>Metrics")[1].split(">tokens<")[0] for h in (a.read_text(), d.read_text())]
    assert metrics[0] == metrics[1] and "net PnL" in metrics[0]
    assert_offline(d.read_text())


def test_report_of_a_real_eurusd_capture(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if not FX.exists():
        pytest.skip("shared data not present")
    a, b, cap = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.jsonl"
    _run(capsys, "simulate", "--data", str(FX), "--date", "2014-05-13", "--days", "2", "--capture", str(cap),
         "--report", str(a), "--json")
    _run(capsys, "report", "--capture", str(cap), "-o", str(b))
    assert a.read_bytes() == b.read_bytes()
    page = assert_offline(a.read_text())
    text = " ".join(page.text)
    assert "2014-05-13" in text and "America/New_York" in text and "EDT" in text


def test_report_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["report", "--capture", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "x.html")]) == 2
    assert "kestrel report:" in capsys.readouterr().err
    assert main(["report", "--sweep", str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_png_export_is_deterministic(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _run(capsys, "simulate", "--png", str(a), "--json")
    _run(capsys, "simulate", "--png", str(b), "--json")
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a.read_bytes() == b.read_bytes()


def test_a_partial_session_is_named_in_the_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fx = FX.with_name("lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet")
    if not fx.exists():
        pytest.skip("shared data not present")
    a = tmp_path / "a.html"
    _run(capsys, "simulate", "--data", str(fx), "--date", "2014-05-15", "--report", str(a), "--json")
    text = " ".join(assert_offline(a.read_text()).text)
    assert "partial session 2014-05-15" in text and "the results cover only that span" in text


def test_a_model_run_reports_its_tokens_and_dollars(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from model_server import by_iteration, serve

    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    plan = "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > high(30m): SELL 100 MKT STOP +0.5%"
    page = tmp_path / "m.html"
    with serve(by_iteration("VIEW deep: quote, stats BUDGET 800", plan)) as srv:
        out = _run(capsys, "simulate", "--agent", "openai:gpt-4o", "--base-url", srv.openai_url,
                   "--checkpoints", "11:00", "--report", str(page), "--json")
    doc = json.loads(out)
    usd, tokens = doc["cost"]["total"]["usd"], doc["cost"]["total"]["tokens"]
    assert usd is not None and usd > 0 and tokens > 0
    assert doc["metrics"]["cost_usd"] == pytest.approx(usd) and doc["metrics"]["tokens"] == tokens
    html = page.read_text()
    assert_offline(html)
    assert "gpt-4o" in html
    metrics = html.split("<h2>Metrics")[1].split("</table>")[0]
    assert f"<td>{usd:.4f}</td>" in metrics and f"<td>{tokens}</td>" in metrics
    per_ordinal = [o["usd"] for o in doc["cost"]["ordinals"]]
    turns = html.split("<h3>Turns per ordinal</h3>")[1].split("</table>")[0]
    assert all(f"<td>{x:.4f}</td>" in turns for x in per_ordinal)
