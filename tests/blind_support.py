"""The scans of blind mode: a text an agent reads in blind mode must show no real symbol,
company name (the shipped names table), date, year, day of the month, price level or volume.
`BlindScan` holds what is real about a run (its symbols, session dates, price ranges and
volumes) and asserts a text shows none of it."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kestrel.data.names import names_of

DAY_OF_MONTH = re.compile(  # a day of the month beside a month (masked or not), or an ordinal day
    r"(?<![\d:])\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:\[date\]|(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b)"
    r"|\[date\]\s+\d{1,2}\b|\b\d{1,2}(?:st|nd|rd|th)\b")
WORDS = re.compile(r"[A-Za-z0-9_]+")
DECIMALS = re.compile(r"(?<![\w.])\d+\.\d+")
WHOLE_NUMBERS = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def date_forms(dates: Iterable[dt.date]) -> set[str]:
    """The ways a text could print each of `dates` (ISO, month-day, month names, ordinals)."""
    out: set[str] = set()
    for d in dates:
        out |= {d.isoformat(), f"{d.month:02d}-{d.day:02d}", f"{d.month}/{d.day}", d.strftime("%b %d"),
                d.strftime("%B %d"), f"{d.day} {d:%B}", f"{d.day} {d:%b}", f"{d.day}th"}
    return out


def years_pattern(dates: Iterable[dt.date]) -> re.Pattern[str]:
    """A year of `dates` as a number of its own (a quantity such as 1900 is no year of the data)."""
    years = sorted({str(d.year) for d in dates})
    return re.compile(r"(?<!\d)(?:" + "|".join(years) + r")(?!\d)")


@dataclass(frozen=True)
class BlindScan:
    """What is real about a run: `symbols`, `dates` (its sessions'), `ranges` (each symbol's
    real price range, widened by 3%) and `volumes` (real volumes a text must not print)."""

    symbols: Sequence[str]
    dates: Sequence[dt.date]
    ranges: Sequence[tuple[float, float]]
    volumes: frozenset[float] = frozenset()
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(n.lower() for s in self.symbols for n in names_of(s)))

    @classmethod
    def of(cls, symbols: Sequence[str], dates: Sequence[dt.date], prices: Sequence[tuple[float, float]],
           volumes: Iterable[float] = ()) -> BlindScan:
        return cls(symbols, dates, [(lo * 0.97, hi * 1.03) for lo, hi in prices], frozenset(volumes))

    def check(self, text: str) -> None:
        """Assert `text` shows nothing real (the module docstring)."""
        words = {w.lower() for w in WORDS.findall(text)}
        assert not words & {s.lower() for s in self.symbols}, text
        low = text.lower()
        assert not any(n in low for n in self.names), text
        for d in date_forms(self.dates):
            assert d not in text, (d, text)
        assert not years_pattern(self.dates).search(text), text
        assert not DAY_OF_MONTH.search(text), text
        for m in DECIMALS.findall(text):
            x = float(m)
            assert not any(lo <= x <= hi for lo, hi in self.ranges), (m, text)
        if self.volumes:
            unbudgeted = re.sub(r"^VIEW .*$", "", text, flags=re.M)  # a view's token budget is the test's own
            for m in WHOLE_NUMBERS.findall(unbudgeted):
                assert float(m) not in self.volumes, (m, text)


__all__ = ["DAY_OF_MONTH", "DECIMALS", "WORDS", "BlindScan", "date_forms", "years_pattern"]
