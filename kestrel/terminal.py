"""Text for a terminal: control characters shown, never sent.

Whatever reaches a terminal from outside Kestrel's own code — a file name, a column, an
agent's id, a model's text, a capture's header, an error a library raised — may carry control
characters: an escape sequence repaints the screen, moves the cursor, sets the title or hides
what follows. `printable(text)` writes each control character (C0 but newline and tab, DEL,
C1) as a visible `\\xNN` escape and leaves everything else alone, so the text reads the same
and can do nothing to the terminal. Every command's error line and every text report goes
through it.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with its control characters escaped (`\\x1b`); newlines and tabs are kept unless
    `one_line`, which escapes them too."""
    return (_CONTROL_ONE_LINE if one_line else _CONTROL).sub(_escape, text)


__all__ = ["printable"]
