"""kestrel.logs: deterministic JSON lines and readable console output."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
import sys
from pathlib import Path

import msgspec
import pytest
import structlog

from kestrel import logs


@pytest.fixture(autouse=True)
def restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


class Usage(msgspec.Struct, frozen=True):
    input: int
    output: int


def test_json_sink_writes_one_deterministic_line_per_record() -> None:
    def write() -> str:
        buf = io.StringIO()
        log = logs.json_sink(buf, ordinal=3)
        log.info("iteration", kind="view", usage=Usage(input=120, output=30), panes=["quote"])
        log.debug("detail", zeta=1, alpha={"b": 2, "a": 1})
        return buf.getvalue()

    text = write()
    assert text == write()  # byte-identical: no timestamps, sorted keys
    assert text.splitlines() == [
        '{"event":"iteration","level":"info","kind":"view","ordinal":3,"panes":["quote"],'
        '"usage":{"input":120,"output":30}}',
        '{"event":"detail","level":"debug","alpha":{"a":1,"b":2},"ordinal":3,"zeta":1}',
    ]


def test_json_sink_level_filter_and_timestamps_on_request() -> None:
    buf = io.StringIO()
    log = logs.json_sink(buf, level="warning", timestamps=True)
    log.info("hidden")
    log.warning("shown")
    (line,) = buf.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "shown" and record["level"] == "warning"
    assert record["timestamp"].endswith("Z")


def test_open_json_sink_appends_lines_to_a_file(tmp_path: Path) -> None:
    path = tmp_path / "evidence.jsonl"
    with logs.open_json_sink(path, run="r1") as log:
        log.info("first")
    with logs.open_json_sink(path, run="r1") as log:
        log.info("second", n=2)
    assert path.read_text().splitlines() == [
        '{"event":"first","level":"info","run":"r1"}',
        '{"event":"second","level":"info","n":2,"run":"r1"}',
    ]


def test_open_json_sink_on_an_unwritable_path_says_which(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="cannot open log file"):
        with logs.open_json_sink(tmp_path / "missing" / "x.jsonl"):
            pass


def test_configure_console_is_readable_without_colors_or_timestamps() -> None:
    buf = io.StringIO()
    logs.configure_console(stream=buf)
    logs.get_logger("actors").warning("actor.restart", actor="feed", restart=1)
    assert buf.getvalue() == (
        "[warning  ] actor.restart                  [actors] actor=feed restart=1\n"
    )


def test_configure_json_sets_the_global_logger() -> None:
    buf = io.StringIO()
    logs.configure_json(stream=buf, level="info")
    logs.get_logger("daemon", pid=1).debug("hidden")
    logs.get_logger("daemon", pid=1).info("started")
    assert buf.getvalue() == '{"event":"started","level":"info","logger":"daemon","pid":1}\n'


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        logs.configure_console(level="loud")  # type: ignore[arg-type]


def test_default_stream_follows_sys_stderr_after_it_is_swapped_and_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logs.configure_console(level="info")
    first.close()  # e.g. a test harness's capture ending
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    structlog.get_logger().info("still.here", n=1)
    assert "still.here" in second.getvalue()
    logs.configure_json(level="info")
    structlog.get_logger().info("json.here")
    assert '"event":"json.here"' in second.getvalue().replace(" ", "")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_runtime_logs_through_the_applications_structlog_configuration(backend: str) -> None:
    """kestrel_actors configures nothing: its restart warning reaches whatever sink the
    application set up (here Kestrel's JSON configuration), bound to logger=kestrel_actors."""
    import anyio

    from kestrel_actors import Actor, ActorSystem, Restart

    class Crash(msgspec.Struct, frozen=True):
        pass

    class Crashy(Actor[Crash]):
        async def receive(self, message: Crash) -> None:
            raise RuntimeError("boom")

    buf = io.StringIO()
    logs.configure_json(stream=buf, level="info")

    async def main() -> None:
        async with ActorSystem() as system:
            ref = system.spawn(Crashy, name="crashy", policy=Restart(max_restarts=1))
            await ref.tell(Crash())
            await anyio.sleep(0.05)

    anyio.run(main, backend=backend)
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    restart = [r for r in records if r["event"] == "actor.restart"]
    assert restart and restart[0]["logger"] == "kestrel_actors" and restart[0]["actor"] == "crashy"
