"""The portfolio ledger keeps its lines in compressed blocks: whatever the block size and
however appends and truncations interleave, its bytes, lines and decoded events are those of
the same lines kept as written."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.engine.ledger import Filled, PositionChanged
from kestrel.engine.portfolio.ledger import BLOCK_BYTES, AccountMark, PortfolioEvent, PortfolioLedger


def _event(k: int) -> tuple[str | None, PortfolioEvent]:
    if k % 3 == 0:
        return None, AccountMark(k, 1_000 + k, 100.0 - k, 100.5, 0.25 * k, -0.5, k % 4)
    symbol = "AAA" if k % 3 == 1 else "BBB"
    if k % 2:
        return symbol, Filled(k, 1_000 + k, k % 5, "buy" if k % 4 else "sell", k % 7 + 1, 10.0 + k / 100, 0.0)
    return symbol, PositionChanged(k, 1_000 + k, k % 9 - 4, 10.5, 0.0)


def _line(symbol: str | None, event: PortfolioEvent) -> bytes:
    body = msgspec.json.encode(event)
    return (body if symbol is None else b'{"symbol":' + msgspec.json.encode(symbol) + b"," + body[1:]) + b"\n"


OPS = st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 60)),
                         st.tuples(st.just("truncate"), st.integers(0, 400))), max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), OPS)
def test_blocks_hold_the_same_lines_as_written(block_bytes: int, ops: list[tuple[str, int]]) -> None:
    ledger = PortfolioLedger(block_bytes=block_bytes)
    lines: list[bytes] = []
    entries: list[tuple[str | None, PortfolioEvent]] = []
    k = 0
    for op, n in ops:
        if op == "append":
            for _ in range(n):
                symbol, event = _event(k)
                k += 1
                ledger.append(symbol, event)
                lines.append(_line(symbol, event))
                entries.append((symbol, event))
        else:
            ledger.truncate(n)
            del lines[n:], entries[n:]
        assert len(ledger) == len(lines)
    assert ledger.to_jsonl() == b"".join(lines)
    assert b"".join(ledger.chunks()) == b"".join(lines)
    assert all(chunk.endswith(b"\n") for chunk in ledger.chunks())
    assert ledger.entries == entries
    assert PortfolioLedger.from_jsonl(ledger.to_jsonl()).to_jsonl() == ledger.to_jsonl()
    whole = b"".join(lines)
    assert ledger.nbytes == len(whole)
    for n in sorted({0, len(lines) // 3, len(lines) // 2, max(0, len(lines) - 1), len(lines), len(lines) + 2}):
        offset = sum(len(line) for line in lines[:n])
        assert ledger.since(n) == whole[offset:] == ledger.bytes_from(offset)
        assert ledger.entries_since(n) == entries[n:]


def test_a_long_ledger_is_held_compressed_and_reads_back_whole() -> None:
    ledger = PortfolioLedger()
    lines = []
    for k in range(40_000):
        symbol, event = _event(k)
        ledger.append(symbol, event)
        lines.append(_line(symbol, event))
    data = b"".join(lines)
    assert len(data) > 2 * BLOCK_BYTES
    chunks = list(ledger.chunks())
    assert len(chunks) >= 3 and b"".join(chunks) == data
    ledger.truncate(5)  # back into the first block
    assert ledger.to_jsonl() == b"".join(lines[:5]) and len(ledger) == 5
