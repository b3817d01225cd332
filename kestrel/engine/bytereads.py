"""Little-endian int64 and float64 items read from `bytes` at a byte offset, for the dense
loop's windows when mypy's runtime library `librt` is absent (pure Python: the engine runs
without the dev tools). With librt, `librt.strings` provides the same functions, which
mypyc compiles to in-place reads (no Python object per item); these return the same values.
"""

from __future__ import annotations

import struct

_I64 = struct.Struct("<q").unpack_from
_F64 = struct.Struct("<d").unpack_from


def read_i64_le(b: bytes, index: int, /) -> int:
    """The int64 at byte offset `index` of `b`, little-endian."""
    out: int = _I64(b, index)[0]
    return out


def read_f64_le(b: bytes, index: int, /) -> float:
    """The float64 at byte offset `index` of `b`, little-endian."""
    out: float = _F64(b, index)[0]
    return out


__all__ = ["read_f64_le", "read_i64_le"]
