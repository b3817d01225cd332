"""A generated universe for the CLI tests: a long-format daily file (`date, symbol, open, high,
low, close, volume`, a seeded random walk per symbol) over real XNYS sessions."""

from __future__ import annotations

import random
from pathlib import Path

FIRST_DAY = "2024-03-01"


def long_csv(path: Path, symbols: tuple[str, ...] = ("AAA", "BBB", "CCC"), n_days: int = 12, seed: int = 7,
             first_day: str = FIRST_DAY, top: float = 400.0) -> Path:
    """`n_days` XNYS sessions from `first_day` of each of `symbols` (first prices drawn in
    20..`top`), written to `path`."""
    import exchange_calendars

    rng = random.Random(seed)
    prices = {s: rng.uniform(20, top) for s in symbols}
    days = exchange_calendars.get_calendar("XNYS").sessions_in_range(first_day, "2024-12-31")[:n_days]
    rows = ["date,symbol,open,high,low,close,volume"]
    for day in days:
        for sym in symbols:
            o = prices[sym]
            c = max(1.0, o * (1 + rng.uniform(-0.03, 0.03)))
            rows.append(f"{day.date().isoformat()},{sym},{o:.2f},{max(o, c) * 1.01:.2f},{min(o, c) * 0.99:.2f},"
                        f"{c:.2f},{rng.randrange(1000, 90000)}")
            prices[sym] = c
    path.write_text("\n".join(rows) + "\n")
    return path


def session_dates(path: Path) -> list[str]:
    """The file's session dates, in order (read back from its rows)."""
    return sorted({line.split(",", 1)[0] for line in path.read_text().splitlines()[1:]})
