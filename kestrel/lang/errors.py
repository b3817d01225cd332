"""Diagnostics and the language's one error type.

A `Diagnostic` locates a problem either by source position (line, column, 1-based, with an
excerpt of the offending line) or, for ASTs built in code, by a path such as
`statement 2, rule 1, action 1`. `str(LangError)` is the repair text handed back to an author:
one block per diagnostic with the place, the message, a caret excerpt, what was expected and
a hint.
"""

from __future__ import annotations

import msgspec


class Diagnostic(msgspec.Struct, frozen=True):
    """One problem in a document. `code` is a stable short identifier (e.g. `unknown-name`)."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None
    width: int = 1
    excerpt: str | None = None
    expected: tuple[str, ...] = ()
    hint: str | None = None
    path: str | None = None

    @property
    def where(self) -> str:
        if self.line is not None:
            return f"line {self.line}, column {self.column}"
        return self.path or "document"

    def render(self) -> str:
        """The repair text for this diagnostic (several lines)."""
        out = [f"{self.where}: {self.message}"]
        if self.excerpt is not None and self.column is not None:
            out.append(f"  {self.excerpt}")
            out.append("  " + " " * (self.column - 1) + "^" * max(1, self.width))
        if self.expected:
            out.append("  expected: " + _words(self.expected))
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)


def _words(items: tuple[str, ...]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]


class LangError(ValueError):
    """A document is not valid Kestrel. Carries every independent diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.diagnostics)
        head = "1 error" if n == 1 else f"{n} errors"
        return f"{head} in Kestrel document:\n" + "\n".join(
            d.render() for d in self.diagnostics
        )

    def __str__(self) -> str:
        return self.render()


KestrelSyntaxError = LangError
"""Alias: the same single error type, under the name some callers expect."""

__all__ = ["Diagnostic", "KestrelSyntaxError", "LangError"]
