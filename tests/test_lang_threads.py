"""The parser shared across threads: one compile per process, one machine per thread, and
every document parsed concurrently gives what it gives serially (AST, diagnostics, positions)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from kestrel.lang import LangError, parse
from kestrel.lang.lalr import Machine, compiled, machine

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "examples").glob("*.kes"))


def _documents() -> list[str]:
    """The corpus and variants of it that fail in each stage: a cut (syntax, token positions),
    a misspelt series (the checker, positions the builder recorded), a fractional quantity (the
    builder's own diagnostics)."""
    docs: list[str] = []
    for path in CORPUS:
        text = path.read_text()
        docs += [text, text[: len(text) // 3], text[: 2 * len(text) // 3],
                 text.replace("last", "lsat"), text.replace(" 100 ", " 10.5 ")]
    docs += ["PASS", "STANDDOWN \"news\"", "PLAN x UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN nosuch > 1: BUY 10 MKT"]
    return docs


def _outcome(text: str) -> str:
    try:
        return "ok " + repr(parse(text))
    except LangError as err:
        return "error " + repr([d.render() for d in err.diagnostics])


def test_threads_parse_as_one_thread_does() -> None:
    docs = _documents()
    serial = [_outcome(d) for d in docs]
    assert sum(o.startswith("error") for o in serial) > len(docs) // 3  # the variants do fail
    assert sum(o.startswith("ok") for o in serial) >= len(CORPUS)
    threads = 8
    barrier = threading.Barrier(threads)
    got: dict[int, list[tuple[int, str]]] = {}
    failures: list[BaseException] = []

    def work(k: int) -> None:
        try:
            order = list(range(len(docs))) * 3
            random.Random(k).shuffle(order)
            barrier.wait()
            got[k] = [(i, _outcome(docs[i])) for i in order]
        except BaseException as exc:  # reported below, never lost in a thread
            failures.append(exc)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures
    assert sorted(got) == list(range(threads))
    for results in got.values():
        mismatched = [docs[i][:60] for i, outcome in results if outcome != serial[i]]
        assert mismatched == []


def test_one_compile_per_process_one_machine_per_thread() -> None:
    mine = machine()
    theirs: list[Machine] = []
    t = threading.Thread(target=lambda: theirs.append(machine()))
    t.start()
    t.join()
    other = theirs[0]
    assert other is not mine and other.builder is not mine.builder
    assert other.table is not mine.table
    assert other.vocabulary is mine.vocabulary is compiled().vocabulary  # the one compile's
    assert compiled() is compiled()
    # each thread's reductions call its own builder: a parse on one fills only that one's positions
    mine.builder.reset()
    other.builder.reset()
    mine.run("PLAN x UNTIL 15:30 RISK maxpos 100 maxloss 300\nWHEN last > 1: BUY 10 MKT")
    assert mine.builder.pos and not other.builder.pos
    mine.builder.reset()
