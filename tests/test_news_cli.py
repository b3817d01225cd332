"""`--news` and `--blind` on the command line: recorded in the capture with the news file's SHA-256,
verified by replay (a moved copy accepted, a tampered file refused), and the view's briefing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.cli import main
from kestrel.session.capture import read_capture

NEWS = [
    {"published_utc": "2024-04-15T12:00:00Z", "symbol": "SAMPLE", "source": "Wire", "title": "Sample Corp beats",
     "summary": "", "related": []},
    {"published_utc": "2024-04-15T14:24:59.999999999Z", "symbol": "SAMPLE", "source": "Wire", "title": "just before"},
    {"published_utc": "2024-04-15T14:25:00.000000001Z", "symbol": "SAMPLE", "source": "Wire", "title": "just after"},
]


def _news(tmp_path: Path) -> Path:
    path = tmp_path / "news.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in NEWS), encoding="utf-8")
    return path


def test_view_shows_news_strictly_before_the_cutoff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    news = _news(tmp_path)
    assert main(["view", "VIEW v: news(5, symbol=self, since=1)", "--at", "10:30", "--date", "2024-04-15",
                 "--news", str(news)]) == 0
    out = capsys.readouterr().out
    assert "04-15 10:24 Wire: just before\n04-15 08:00 Wire: Sample Corp beats" in out and "just after" not in out
    assert main(["view", "VIEW v: news", "--at", "10:30", "--date", "2024-04-15", "--news", str(news), "--blind"]) == 0
    blind = capsys.readouterr().out
    assert "NEWS SYM1 2" in blind and "SYM1 beats" in blind and "SAMPLE" not in blind and "Sample" not in blind


def test_capture_records_the_news_and_replay_checks_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    news = _news(tmp_path)
    cap, ledger = tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    assert main(["simulate", "--news", str(news), "--capture", str(cap), "--ledger", str(ledger), "--blind",
                 "--backend", "direct"]) == 0
    header, _ = read_capture(cap)
    assert header.source is not None and header.source.news is not None
    assert header.source.news.path == str(news.resolve()) and header.source.news.items == 3
    assert main(["replay", str(cap), "--expect-ledger", str(ledger), "--backend", "direct"]) == 0
    moved = tmp_path / "moved.jsonl"
    moved.write_bytes(news.read_bytes())
    news.unlink()
    capsys.readouterr()
    assert main(["replay", str(cap), "--backend", "direct"]) == 2
    assert "the captured news file is not there; pass --news PATH" in capsys.readouterr().err
    assert main(["replay", str(cap), "--news", str(moved), "--expect-ledger", str(ledger), "--backend", "direct"]) == 0
    moved.write_text(moved.read_text(encoding="utf-8").replace("beats", "misses"), encoding="utf-8")
    capsys.readouterr()
    assert main(["replay", str(cap), "--news", str(moved), "--backend", "direct"]) == 2
    err = capsys.readouterr().err
    assert "its checksum changed since the capture" in err and len(err.strip().splitlines()) == 1


def test_a_bad_news_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"symbol": "SAMPLE", "title": "no time"}\n', encoding="utf-8")
    assert main(["simulate", "--news", str(bad), "--backend", "direct"]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 1, column 'published_utc': no publication time" in err and len(err.splitlines()) == 1
