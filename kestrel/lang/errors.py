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

    def located(self, source: str) -> str:
        """One `source:line:col: message (expected: ...) (hint: ...)` line, the form compilers
        print (`source:path: ...` for a diagnostic located by path in a code-built AST)."""
        where = f"{self.line}:{self.column}" if self.line is not None else (self.path or "1:1")
        expected = f" (expected: {', '.join(self.expected)})" if self.expected else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{source}:{where}: {self.message}{expected}{hint}"

    def render(self) -> str:
        """The repair text for this diagnostic (several lines)."""
        out = [f"{self.where}: {self.message}"]
        if self.excerpt is not None and self.column is not None:
            text, col, width = _window(self.excerpt.replace("\t", " "), self.column, self.width)
            out.append(f"  {text}")
            out.append("  " + " " * (col - 1) + "^" * width)
        if self.expected:
            out.append("  expected: " + _words(self.expected))
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)


_EXCERPT = 100


def _window(line: str, column: int, width: int) -> tuple[str, int, int]:
    """At most ~_EXCERPT characters of `line` around `column`, with the caret column and
    width adjusted; cut ends are marked with `…`."""
    width = max(1, min(width, _EXCERPT // 2))
    if len(line) <= _EXCERPT:
        return line, column, width
    start = max(0, column - 1 - _EXCERPT // 2)
    end = min(len(line), start + _EXCERPT)
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(line) else ""
    return prefix + line[start:end] + suffix, column - start + len(prefix), width


def _words(items: tuple[str, ...]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]


MAX_RENDERED = 12
"""Diagnostics spelled out in `str(LangError)`; all of them stay in `.diagnostics`."""


class LangError(ValueError):
    """A document is not valid Kestrel. Carries every independent diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        """The repair text: every diagnostic up to `MAX_RENDERED`, then a count of the rest."""
        count = len(self.diagnostics)
        head = "1 error" if count == 1 else f"{count} errors"
        shown = [diagnostic.render() for diagnostic in self.diagnostics[:MAX_RENDERED]]
        if count > MAX_RENDERED:
            shown.append(f"... and {count - MAX_RENDERED} more; fix these first")
        return f"{head} in Kestrel document:\n" + "\n".join(shown)

    def __str__(self) -> str:
        return self.render()


KestrelSyntaxError = LangError
"""Alias: the same single error type, under the name some callers expect."""

__all__ = ["Diagnostic", "KestrelSyntaxError", "LangError"]
