"""Construction-time validation of boundary Structs.

msgspec checks a field's declared type (and its `Meta` bounds) when a Struct is decoded, not
when it is built in code: `EngineConfig(end_of_day="Flatten")` would otherwise exist. A
boundary Struct's `__post_init__` calls `check_fields`, which holds every field to its
declared type exactly as decoding would (strict: no bool for an int, no str for a bool).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Literal, get_args, get_origin

import msgspec

_fields = lru_cache(maxsize=None)(msgspec.structs.fields)  # a class's fields never change


def check_fields(obj: msgspec.Struct, skip: Iterable[str] = ()) -> None:
    """Raise ValueError naming the first field of `obj` whose value does not convert, unchanged,
    to its declared type (`skip`: fields with types msgspec cannot check, e.g. callables)."""
    skipped = frozenset(skip)
    cls = type(obj)
    for field in _fields(cls):
        if field.name in skipped:
            continue
        value = getattr(obj, field.name)
        try:
            converted = msgspec.convert(value, field.type, strict=True)
        except msgspec.ValidationError as exc:
            raise ValueError(f"{cls.__name__}: {field.name}={value!r} is invalid: {exc}"
                             f"{_choices(field.type)}") from None
        if type(converted) is not type(value) and not (
                isinstance(value, int) and isinstance(converted, float)):
            want = type(converted).__name__
            raise ValueError(f"{cls.__name__}: {field.name} must be of type {want}, got "
                             f"{type(value).__name__} {value!r}")


def _choices(tp: object) -> str:
    """The allowed values of a `Literal` type, as a hint (else "")."""
    if get_origin(tp) is Literal:
        return " (one of " + ", ".join(repr(a) for a in get_args(tp)) + ")"
    return ""
