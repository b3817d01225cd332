"""Vectorized timestamp parsing to int64 UTC nanoseconds (no Python loop per row).

Formats: `iso` (`2014-05-06T00:00:00.158Z`, `2013-01-01 22:00:00.295000+00:00`,
`2024-01-01 23:01:00`), `unix_s|ms|us|ns` (integer or decimal), `histdata`
(`20200101 170000065`, i.e. YYYYMMDD HHMMSSfff). Naive timestamps are read in `tz`, exactly
per row across DST switches (see `localize` for the skipped and the repeated hour).
A bad value raises `BadValue(index, text, reason)`; callers turn it into a `DataError`.
"""

from __future__ import annotations

import datetime as dt
import warnings
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import numpy.typing as npt

from kestrel.frame.session import NS_PER_DAY
from kestrel.frame.ticks import I64, NS_PER_S

NAT = np.iinfo(np.int64).min
_UNIX_SCALE = {"unix_s": NS_PER_S, "unix_ms": 1_000_000, "unix_us": 1_000, "unix_ns": 1}


class BadValue(ValueError):
    def __init__(self, index: int, text: str, reason: str) -> None:
        self.index = index
        self.text = text
        self.reason = reason
        super().__init__(f"row index {index}: {reason}: {text!r}")


def _first_bad_datetime(col: npt.NDArray[np.str_]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, s in enumerate(col.tolist()):
            try:
                if np.isnat(np.datetime64(s, "ns")):
                    return i
            except ValueError:
                return i
    return 0


def _bytes_matrix(col: npt.NDArray[np.str_]) -> tuple[npt.NDArray[np.uint8], I64, int]:
    try:
        b = np.char.encode(col, "ascii")
    except UnicodeEncodeError:
        i = next(i for i, s in enumerate(col.tolist()) if not s.isascii())
        raise BadValue(i, str(col[i]), "non-ASCII character in a timestamp") from None
    w = b.dtype.itemsize
    m = np.frombuffer(b.tobytes(), dtype=np.uint8).reshape(len(col), w).copy()
    lengths = np.char.str_len(b).astype(np.int64)
    return m, lengths, w


def parse_iso(col: npt.NDArray[np.str_], tz: str) -> I64:
    n = len(col)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    m, length, w = _bytes_matrix(np.char.strip(col))
    rows = np.arange(n)
    offset = np.zeros(n, dtype=np.int64)
    explicit = np.zeros(n, dtype=bool)
    # trailing Z
    last = m[rows, np.maximum(length - 1, 0)]
    z = (length > 0) & (last == ord("Z"))
    m[rows[z], length[z] - 1] = 0
    length = np.where(z, length - 1, length)
    explicit |= z
    # trailing ±hh:mm (only after a time part: the date's own '-' sits at least 10 chars in)
    if w >= 6:
        k = np.maximum(length - 6, 0)
        sign = m[rows, k]
        has = (length >= 16) & ((sign == ord("+")) | (sign == ord("-"))) & (m[rows, k + 3] == ord(":"))
        if has.any():
            d = m.astype(np.int64) - 48
            hh = d[rows, k + 1] * 10 + d[rows, k + 2]
            mm = d[rows, k + 4] * 10 + d[rows, k + 5]
            off = (hh * 3600 + mm * 60) * NS_PER_S * np.where(sign == ord("-"), -1, 1)
            offset = np.where(has, off, 0)
            cols = np.arange(w)[None, :]
            m[(cols >= k[:, None]) & has[:, None]] = 0
            explicit |= has
    text = np.frombuffer(m.tobytes(), dtype=f"S{w}")
    try:
        local = text.astype("datetime64[ns]").astype(np.int64)
    except ValueError:
        i = _first_bad_datetime(col)
        raise BadValue(i, str(col[i]), "unparsable timestamp (expected ISO-8601 like 2024-01-02T09:30:00.123Z)") from None
    bad = np.flatnonzero(local == NAT)
    if bad.size:
        i = int(bad[0])
        raise BadValue(i, str(col[i]), "empty or unparsable timestamp")
    utc = local - offset
    if not explicit.all():
        naive = np.flatnonzero(~explicit)
        utc[naive] = _localize_rows(col, local[naive], tz, naive)
    return utc


def parse_histdata(col: npt.NDArray[np.str_], tz: str) -> I64:
    n = len(col)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    m, length, w = _bytes_matrix(np.char.strip(col))
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
    valid = (mo >= 1) & (mo <= 12) & (dd >= 1) & (dd <= 31) & (hh < 24) & (mi < 60) & (ss < 61)
    if not valid.all():
        i = int(np.flatnonzero(~valid)[0])
        raise BadValue(i, str(col[i]), "timestamp field out of range")
    months = ((y - 1970) * 12 + (mo - 1)).astype("datetime64[M]")
    days = months.astype("datetime64[D]").astype(np.int64) + (dd - 1)
    local = days * NS_PER_DAY + ((hh * 3600 + mi * 60 + ss) * 1000 + ms) * 1_000_000
    return _localize_rows(col, local, tz, None)


def parse_unix(col: npt.NDArray[np.str_], fmt: str) -> I64:
    scale = _UNIX_SCALE[fmt]
    s = np.char.strip(col)
    try:
        if np.all(np.char.isdigit(s)):
            return s.astype(np.int64) * scale
        f = s.astype(np.float64)
    except (ValueError, OverflowError):
        i = _first_bad_number(s)
        raise BadValue(i, str(col[i]), f"unparsable epoch timestamp ({fmt})") from None
    bad = np.flatnonzero(~np.isfinite(f))
    if bad.size:
        i = int(bad[0])
        raise BadValue(i, str(col[i]), f"unparsable epoch timestamp ({fmt})")
    return np.round(f * scale).astype(np.int64)


def _first_bad_number(col: npt.NDArray[np.str_]) -> int:
    for i, s in enumerate(col.tolist()):
        try:
            float(s)
        except ValueError:
            return i
    return 0


def _offset_at(zone: ZoneInfo, utc_s: int) -> int:
    """The zone's UTC offset in seconds at the instant `utc_s` (seconds since the epoch)."""
    off = dt.datetime.fromtimestamp(utc_s, tz=zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def _transition(zone: ZoneInfo, lo_s: int, hi_s: int) -> int:
    """The first second in (lo_s, hi_s] at which the offset differs from the offset at lo_s."""
    before = _offset_at(zone, lo_s)
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if _offset_at(zone, mid) == before:
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
        old, new = _offset_at(zone, lo_s), _offset_at(zone, hi_s)
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
