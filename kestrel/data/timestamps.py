"""Vectorized timestamp parsing to int64 UTC nanoseconds (no Python loop per row).

Formats: `iso` (`2014-05-06T00:00:00.158Z`, `2013-01-01 22:00:00.295000+00:00`,
`2024-01-01 23:01:00`, offsets `+0000`/`+00`, a ` UTC` suffix), `unix_s|ms|us|ns` (integer or
decimal), `histdata` (`20200101 170000065`, i.e. YYYYMMDD HHMMSSfff). Text is never handed to
numpy's datetime parser (its cast of byte strings can crash the process in numpy 2.x and
warns about offsets): ISO and HistData text is checked and converted by digit arithmetic on a
uint8 matrix, every field validated (calendar, clock, offset, years MIN_YEAR..MAX_YEAR so the
int64 nanoseconds cannot overflow). Naive timestamps are read in `tz`, exactly
per row across DST switches (see `localize` for the skipped and the repeated hour).
A bad value raises `BadValue(index, text, reason)`; callers turn it into a `DataError`.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import numpy.typing as npt

from kestrel.market.session import NS_PER_DAY, zone_offset_s
from kestrel.market.ticks import I64, NS_PER_S

NAT = np.iinfo(np.int64).min
_EPOCH_LIMIT_NS = 9_000_000_000_000_000_000  # int64 ns end in 2262; a margin for the session grid
EPOCH_SPAN = "1684-10-19 08:00 .. 2255-03-14 16:00 UTC"  # ±_EPOCH_LIMIT_NS from 1970
_UNIX_SCALE = {"unix_s": NS_PER_S, "unix_ms": 1_000_000, "unix_us": 1_000, "unix_ns": 1}


class BadValue(ValueError):
    def __init__(self, index: int, text: str, reason: str) -> None:
        self.index = index
        self.text = text
        self.reason = reason
        super().__init__(f"row index {index}: {reason}: {text!r}")


_SPACE = (32, 9, 13, 10, 11, 12)


def _bytes_matrix(col: npt.NDArray[np.str_]) -> tuple[npt.NDArray[np.uint8], I64, int]:
    """Text as an (n, width) uint8 matrix, its lengths and the width, with surrounding white
    space removed: a zero-copy view of the UCS-4 code points (no per-row Python call); a
    code point above 127 is a `BadValue` (timestamps are ASCII)."""
    col = np.ascontiguousarray(col, dtype=str)
    n, w = len(col), max(1, col.dtype.itemsize // 4)
    if col.dtype.itemsize == 0:
        return np.zeros((n, 1), dtype=np.uint8), np.zeros(n, dtype=np.int64), 1
    cp = col.view(np.uint32).reshape(n, w)
    wide = np.flatnonzero((cp > 127).any(axis=1))
    if wide.size:
        i = int(wide[0])
        raise BadValue(i, str(col[i]), "non-ASCII character in a timestamp")
    m = cp.astype(np.uint8)
    space = np.isin(m, _SPACE)
    if space[:, 0].any():  # leading white space: strip it the slow way (rare)
        return _bytes_matrix(np.char.strip(col))
    significant = (m != 0) & ~space
    lengths = np.where(significant.any(axis=1), w - np.argmax(significant[:, ::-1], axis=1), 0).astype(np.int64)
    m[np.arange(w)[None, :] >= lengths[:, None]] = 0
    return m, lengths, w


# ISO-8601 by digit arithmetic on a byte matrix (no numpy datetime parsing of text)

_ISO_HINT = "expected ISO-8601 like 2024-01-02T09:30:00.123Z"
MIN_YEAR, MAX_YEAR = 1678, 2261  # int64 nanoseconds since 1970 cover 1677-09-21 .. 2262-04-11
_FRACTION_DIGITS = 9
_CORE = 20 + _FRACTION_DIGITS  # YYYY-MM-DDTHH:MM:SS.fffffffff


def _digits(d: npt.NDArray[np.int16], a: int, b: int) -> I64:
    """The number written by character positions a..b-1 (rows of the transposed digit matrix)."""
    out: I64 = d[a].astype(np.int64)
    for j in range(a + 1, b):
        out = out * 10 + d[j].astype(np.int64)
    return out


def days_from_civil(y: I64, mo: I64, d: I64) -> I64:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm), vectorized."""
    y = y - (mo <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (mo + np.where(mo > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    out: I64 = era * 146_097 + doe - 719_468
    return out


def _days_in_month(y: I64, mo: I64) -> I64:
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    table = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
    out: I64 = table[np.clip(mo, 0, 12)] + ((mo == 2) & leap)
    return out


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def parse_iso(col: npt.NDArray[np.str_], tz: str) -> I64:
    """`YYYY-MM-DD`, then optionally `T` or a space and `HH:MM[:SS[.f{1,9}]]`, then optionally
    `Z`, ` UTC`, `±hh:mm`, `±hhmm` or `±hh`. Validated field by field (calendar, clock, year
    range); the first bad row raises `BadValue`."""
    n = len(col)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    raw, length, w = _bytes_matrix(col)
    width = max(w, _CORE + 6)
    m = np.zeros((n, width), dtype=np.uint8)
    m[:, :w] = raw
    rows = np.arange(n)
    explicit = np.zeros(n, dtype=bool)
    offset_s = np.zeros(n, dtype=np.int64)

    def at(k: I64) -> npt.NDArray[np.uint8]:
        return m[rows, np.clip(k, 0, width - 1)]

    def is_digit(k: I64) -> npt.NDArray[np.bool_]:
        c = at(k)
        return (c >= 48) & (c <= 57) & (k >= 0)

    # suffixes: ` UTC` / `UTC`, `Z`, then a numeric offset after the time part (position >= 16)
    utc = (length >= 13) & (at(length - 3) == ord("U")) & (at(length - 2) == ord("T")) & (at(length - 1) == ord("C"))
    length = np.where(utc, length - 3, length)
    length = np.where(utc & (at(length - 1) == ord(" ")), length - 1, length)
    z = ~utc & (length >= 11) & (at(length - 1) == ord("Z"))
    length = np.where(z, length - 1, length)
    explicit |= utc | z
    for size, colon in ((6, True), (5, False), (3, False)):
        k = length - size
        sign = at(k)
        has = ~explicit & (k >= 16) & ((sign == ord("+")) | (sign == ord("-"))) & is_digit(k + 1) & is_digit(k + 2)
        if size == 6:
            has &= (at(k + 3) == ord(":")) & is_digit(k + 4) & is_digit(k + 5)
        elif size == 5:
            has &= is_digit(k + 3) & is_digit(k + 4)
        if not has.any():
            continue
        d = at(k + 1).astype(np.int64) * 10 + at(k + 2) - 11 * 48
        mm = np.zeros(n, dtype=np.int64)
        if size > 3:
            at_mm = k + (4 if colon else 3)
            mm = at(at_mm).astype(np.int64) * 10 + at(at_mm + 1) - 11 * 48
        bad = has & ((d > 14) | (mm > 59) | ((d == 14) & (mm > 0)))
        if bad.any():
            i = _first(bad)
            raise BadValue(i, str(col[i]), "UTC offset out of range (at most ±14:00)")
        off = (d * 3600 + mm * 60) * np.where(sign == ord("-"), -1, 1)
        offset_s = np.where(has, off, offset_s)
        length = np.where(has, k, length)
        explicit |= has
    # blank everything from the end of the core text on, then check the core field by field
    # on the transposed matrix (one contiguous row per character position)
    m[np.arange(width)[None, :] >= length[:, None]] = 0
    t = np.ascontiguousarray(m[:, :_CORE].T)
    d = t.astype(np.int16) - 48
    digit = (d >= 0) & (d <= 9)
    shape_ok = (length == 10) | (length == 16) | (length == 19) | ((length >= 21) & (length <= _CORE))
    sep_ok = (t[4] == ord("-")) & (t[7] == ord("-")) & digit[[0, 1, 2, 3, 5, 6, 8, 9]].all(axis=0)
    timed = length > 10
    sep_ok &= ~timed | (((t[10] == ord("T")) | (t[10] == ord(" "))) & (t[13] == ord(":"))
                        & digit[[11, 12, 14, 15]].all(axis=0))
    secs = length > 16
    sep_ok &= ~secs | ((t[16] == ord(":")) & digit[[17, 18]].all(axis=0))
    frac = length > 19
    rows_at = np.arange(20, _CORE)[:, None]
    frac_digits_ok = np.where(rows_at < length[None, :], digit[20:_CORE], True).all(axis=0)
    sep_ok &= ~frac | (((t[19] == ord(".")) | (t[19] == ord(","))) & frac_digits_ok)
    ok = shape_ok & sep_ok
    if not ok.all():
        i = _first(~ok)
        why = "empty timestamp" if length[i] == 0 and not str(col[i]).strip() else f"unparsable timestamp ({_ISO_HINT})"
        raise BadValue(i, str(col[i]), why)
    y, mo, dd = _digits(d, 0, 4), _digits(d, 5, 7), _digits(d, 8, 10)
    hh = np.where(timed, _digits(d, 11, 13), 0)
    mi = np.where(timed, _digits(d, 14, 16), 0)
    ss = np.where(secs, _digits(d, 17, 19), 0)
    ns = np.zeros(n, dtype=np.int64)
    for j in range(20, _CORE):  # zeros past the end (blanked above) add nothing: 0 - 48 is masked
        ns += np.where(j < length, d[j], 0).astype(np.int64) * (10 ** (_CORE - 1 - j))
    out_of_range = (y < MIN_YEAR) | (y > MAX_YEAR)
    if out_of_range.any():
        i = _first(out_of_range)
        raise BadValue(i, str(col[i]), f"year {int(y[i])} out of range (timestamps must fall in {MIN_YEAR}..{MAX_YEAR})")
    valid = (mo >= 1) & (mo <= 12) & (dd >= 1) & (dd <= _days_in_month(y, mo)) & (hh < 24) & (mi < 60) & (ss < 60)
    if not valid.all():
        i = _first(~valid)
        raise BadValue(i, str(col[i]), "timestamp field out of range (no such date or time of day)")
    local = days_from_civil(y, mo, dd) * NS_PER_DAY + (hh * 3600 + mi * 60 + ss) * NS_PER_S + ns
    utc_ns: I64 = np.asarray(local - offset_s * NS_PER_S, dtype=np.int64)
    if not explicit.all():
        naive = np.flatnonzero(~explicit)
        utc_ns[naive] = _localize_rows(col, local[naive], tz, naive)
    return utc_ns


def parse_histdata(col: npt.NDArray[np.str_], tz: str) -> I64:
    n = len(col)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    m, length, w = _bytes_matrix(col)
    ok = length == 18
    if w >= 18:
        d = m[:, :18].astype(np.int64) - 48
        digit_pos = [i for i in range(18) if i != 8]
        ok &= np.all((d[:, digit_pos] >= 0) & (d[:, digit_pos] <= 9), axis=1) & (m[:, 8] == ord(" "))
    else:
        ok[:] = False
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise BadValue(i, str(col[i]), "unparsable HistData timestamp (expected YYYYMMDD HHMMSSfff)")

    def num(a: int, b: int) -> I64:
        out = np.zeros(n, dtype=np.int64)
        for j in range(a, b):
            out = out * 10 + d[:, j]
        return out

    y, mo, dd = num(0, 4), num(4, 6), num(6, 8)
    hh, mi, ss, ms = num(9, 11), num(11, 13), num(13, 15), num(15, 18)
    out_of_range = (y < MIN_YEAR) | (y > MAX_YEAR)
    if out_of_range.any():
        i = _first(out_of_range)
        raise BadValue(i, str(col[i]), f"year {int(y[i])} out of range (timestamps must fall in {MIN_YEAR}..{MAX_YEAR})")
    valid = (mo >= 1) & (mo <= 12) & (dd >= 1) & (dd <= _days_in_month(y, mo)) & (hh < 24) & (mi < 60) & (ss < 60)
    if not valid.all():
        i = int(np.flatnonzero(~valid)[0])
        raise BadValue(i, str(col[i]), "timestamp field out of range (no such date or time of day)")
    days = days_from_civil(y, mo, dd)
    local = days * NS_PER_DAY + ((hh * 3600 + mi * 60 + ss) * 1000 + ms) * 1_000_000
    return _localize_rows(col, local, tz, None)


def parse_unix(col: npt.NDArray[np.str_], fmt: str) -> I64:
    """Integer or decimal epoch values; the result must lie within ±9e18 ns of 1970
    (`EPOCH_SPAN`), else `BadValue` names the first value out of range."""
    scale = _UNIX_SCALE[fmt]
    s = np.char.strip(col)
    limit = _EPOCH_LIMIT_NS // scale
    try:
        if len(s) and np.all(np.char.isdigit(s)) and np.all(np.char.str_len(s) <= 18):
            v = s.astype(np.int64)
            far = np.flatnonzero(v > limit)
            if far.size:
                i = int(far[0])
                raise BadValue(i, str(col[i]), f"epoch timestamp ({fmt}) out of range (epoch values must fall in {EPOCH_SPAN})")
            out: I64 = v * scale
            return out
        f = s.astype(np.float64)
    except (ValueError, OverflowError) as e:
        if isinstance(e, BadValue):
            raise
        i = _first_bad_number(s)
        raise BadValue(i, str(col[i]), f"unparsable epoch timestamp ({fmt})") from None
    bad = np.flatnonzero(~np.isfinite(f))
    if bad.size:
        i = int(bad[0])
        raise BadValue(i, str(col[i]), f"unparsable epoch timestamp ({fmt})")
    far = np.flatnonzero(np.abs(f) > limit)
    if far.size:
        i = int(far[0])
        raise BadValue(i, str(col[i]), f"epoch timestamp ({fmt}) out of range (epoch values must fall in {EPOCH_SPAN})")
    rounded: I64 = np.round(f * scale).astype(np.int64)
    return rounded


def _first_bad_number(col: npt.NDArray[np.str_]) -> int:
    for i, s in enumerate(col.tolist()):
        try:
            float(s)
        except ValueError:
            return i
        if s.strip().isdigit() and len(s.strip()) > 18:
            return i
    return 0


def _transition(zone: ZoneInfo, lo_s: int, hi_s: int) -> int:
    """The first second in (lo_s, hi_s] at which the offset differs from the offset at lo_s."""
    before = zone_offset_s(zone, lo_s)
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if zone_offset_s(zone, mid) == before:
            lo_s = mid
        else:
            hi_s = mid
    return hi_s


def _iso_ns(local_ns: int) -> str:
    return str(np.datetime64(local_ns, "ns").astype("datetime64[ms]"))


def _localize_rows(col: npt.NDArray[np.str_], local: I64, tz: str, rows: I64 | None) -> I64:
    """`localize` for parsed text rows (`rows`: their indexes in `col`, None for all), naming
    the source text when a time does not exist in `tz`."""
    try:
        return localize(local, tz)
    except BadValue as e:
        i = e.index if rows is None else int(rows[e.index])
        raise BadValue(i, str(col[i]), e.reason) from None


def localize(local_ns: I64, tz: str) -> I64:
    """Naive wall-clock ns in `tz` → UTC ns, exact across DST switches.

    Per local calendar day, the offsets at the two ends of the UTC span the day can map to
    (local midnight - 14 h, next midnight + 14 h) are compared; a day where they differ holds a
    switch, found by bisection to the second. Rows are then mapped by masks (no loop per row):
    - before the switch's wall-clock time the old offset applies, after it the new one;
    - a wall-clock time that does not exist (the hour skipped when clocks go forward) raises
      `BadValue`: such a row cannot have been recorded in `tz`;
    - a wall-clock time that occurs twice (the hour repeated when clocks go back) takes the
      first (pre-switch) offset until the local clock steps back inside the repeated hour;
      from that row on, the second. A file that never steps back there is read as all-first.
    """
    if tz in ("UTC", "Etc/UTC", "utc"):
        return local_ns
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {tz!r} (use an IANA name like 'America/New_York' or 'Etc/GMT+5')") from None
    days = local_ns // NS_PER_DAY
    uniq, inv = np.unique(days, return_inverse=True)
    inv = inv.reshape(-1)
    reach = 14 * 3600  # no zone is further than 14 h from UTC
    offs = np.empty(len(uniq), dtype=np.int64)
    switches: list[tuple[int, int, int, int]] = []  # (day index, switch second, old, new)
    for j, day in enumerate(uniq.tolist()):
        lo_s, hi_s = day * 86_400 - reach, (day + 1) * 86_400 + reach
        old, new = zone_offset_s(zone, lo_s), zone_offset_s(zone, hi_s)
        offs[j] = old
        if old != new:
            switches.append((j, _transition(zone, lo_s, hi_s), old, new))
    out: I64 = local_ns - offs[inv] * NS_PER_S
    for j, switch_s, old, new in switches:
        rows = np.flatnonzero(inv == j)
        local = local_ns[rows]
        first_new = (switch_s + new) * NS_PER_S  # wall clock from which only `new` applies
        last_old = (switch_s + old) * NS_PER_S  # wall clock up to which only `old` applies
        use_new = local >= max(first_new, last_old)
        if new > old:  # clocks go forward: [last_old, first_new) does not exist
            gap = np.flatnonzero((local >= last_old) & (local < first_new))
            if gap.size:
                i = int(rows[gap[0]])
                raise BadValue(i, _iso_ns(int(local_ns[i])),
                               f"wall-clock time skipped by the DST switch in {tz} (no such local time)")
        else:  # clocks go back: [first_new, last_old) occurs twice
            amb = np.flatnonzero((local >= first_new) & (local < last_old))
            if amb.size > 1:
                back = np.flatnonzero(np.diff(local[amb]) < 0)
                if back.size:
                    use_new[amb[int(back[0]) + 1 :]] = True
        out[rows] = local - np.where(use_new, new, old) * NS_PER_S
    return out


def parse_timestamps(col: npt.NDArray[np.str_], fmt: str, tz: str) -> I64:
    """Parse a column of timestamp text; raises BadValue on the first bad value."""
    if fmt == "iso":
        return parse_iso(col, tz)
    if fmt == "histdata":
        return parse_histdata(col, tz)
    if fmt in _UNIX_SCALE:
        return parse_unix(col, fmt)
    raise ValueError(f"unknown timestamp format {fmt!r}")
