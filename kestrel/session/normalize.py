"""Reading replies as models write them: the one normalization step before parsing.

Chat models wrap their statement: in a markdown fence, after a `<think>` block (local
reasoning models such as qwen3 and DeepSeek-R1 emit one), with a sentence of prose before or
after it. `normalize_reply(text)` strips exactly those wrappers, in this order, and says what
it stripped, so the loop parses the statement and records the change in the evidence:

1. reasoning: every `<think>...</think>` block (also `<thinking>`, `<reasoning>`; any case);
   a closing tag with no opening one drops everything before it (a template that opened the
   block in the prompt); an opening tag never closed drops the rest (a reply cut while it
   was still thinking). A provider's separate reasoning field (`reasoning_content`, ...)
   never reaches the text at all: the adapter sets it aside (`AgentReply.reasoning`), and
   the loop records that it did;
2. fences: a reply holding one fenced block (```` ``` ```` or `~~~`, any info string such as
   `kestrel`) is that block's content; an opening fence never closed (a cut reply) keeps what
   follows it; several blocks are kept only when exactly one of them holds a statement; a
   reply wrapped in single backticks loses them;
3. prose: the lines around exactly one statement are dropped. A statement starts at a line
   whose first word is a statement keyword (PLAN, VIEW, STANDDOWN, PASS, any case) and is the
   longest run of lines from there that the language reads as one statement (its parser
   decides: a type error still counts as a statement, whose repair the parser gives); prose
   is allowed only before and after it, so a line after it that continues a statement (an
   upper-case WHEN, AND, BUY, STOP, ... or an operator) means prose between its lines.

Anything ambiguous is not guessed at: two statements, a statement keyword inside prose
between the rules, or several code blocks each holding a statement give an `error` that
names what to send instead (the loop turns it into a repair). A reply that needs none of
this comes back unchanged with no change recorded, so replies written as the language card
asks cost nothing and behave exactly as before. Stripped lines become blank lines, so the
parser's line numbers in a repair are the lines of the reply the model wrote.

Pure and deterministic: the same text gives the same result.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from kestrel.lang import LangError, parse
from kestrel.lang.ast import Module

STATEMENT_KEYWORDS = ("PLAN", "VIEW", "STANDDOWN", "PASS")
CONTINUATION_KEYWORDS = (
    "WHEN", "ON", "UNTIL", "FOR", "RISK", "MAXPOS", "MAXLOSS", "MAXORDERS", "BUDGET",
    "AND", "OR", "NOT", "CROSSES", "ABOVE", "BELOW", "BUY", "SELL", "FLAT", "CANCEL", "MKT",
    "MARKET", "LMT", "LIMIT", "STP", "STOP", "TARGET", "TRAIL", "TTL",
)
"""Upper-case words a line continuing a statement may start with (the language's keywords)."""

_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.MULTILINE)
_START = re.compile(r"^[ \t]*(" + "|".join(STATEMENT_KEYWORDS) + r")(?![A-Za-z0-9_])", re.IGNORECASE)
_CONTINUE = re.compile(r"^[ \t]*(?:" + "|".join(CONTINUATION_KEYWORDS) + r")(?![A-Za-z0-9_])")


class NormalizedReply(msgspec.Struct, frozen=True):
    """`text`: what to parse; `changes`: what was stripped, one phrase each, in order (empty:
    the reply was used as written); `error`: the repair text when the reply is ambiguous (then
    `text` is the reply as written); `unclosed_think`: a reasoning block was opened and never
    closed (a reply cut while thinking)."""

    text: str
    changes: tuple[str, ...] = ()
    error: str | None = None
    unclosed_think: bool = False


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _blank(text: str) -> str:
    """`text` as the blank lines it spans (stripped text keeps the line numbers of the rest)."""
    return "\n" * text.count("\n")


def _strip_reasoning(text: str, changes: list[str]) -> tuple[str, bool]:
    n = 0
    chars = 0

    def blank(m: re.Match[str]) -> str:
        nonlocal n, chars
        n += 1
        chars += len(m.group(0))
        return _blank(m.group(0))

    out = _BLOCK.sub(blank, text)
    close = _CLOSE.search(out)
    if close is not None and _OPEN.search(out, 0, close.start()) is None:
        last = close
        for last in _CLOSE.finditer(out):
            pass
        chars += last.end()
        out = _blank(out[:last.end()]) + out[last.end():]
        n += 1
    unclosed = False
    opened = _OPEN.search(out)
    if opened is not None:
        chars += len(out) - opened.start()
        out = out[:opened.start()]
        n += 1
        unclosed = True
    if n:
        tag = f"<{(_OPEN.search(text) or _CLOSE.search(text)).group(1).lower()}>"  # type: ignore[union-attr]
        what = f"{tag} block" if n == 1 else f"{n} {tag} blocks"
        changes.append(f"{what} stripped ({chars} chars)" + ("; it was never closed" if unclosed else ""))
    return out, unclosed


def _fenced_blocks(text: str) -> tuple[list[tuple[int, int, str, str]], bool]:
    """Fenced blocks as (start of the opening line, end of the closing line, info, content);
    True as the second item when the last fence opens a block that never closes."""
    marks = list(_FENCE.finditer(text))
    blocks: list[tuple[int, int, str, str]] = []
    i = 0
    while i < len(marks):
        opening = marks[i]
        fence = opening.group(1)
        j = i + 1
        while j < len(marks) and not (marks[j].group(1).startswith(fence[0]) and len(marks[j].group(1)) >= len(fence)
                                      and not marks[j].group(2).strip()):
            j += 1
        body_start = opening.end() + 1
        if j == len(marks):
            blocks.append((opening.start(), len(text), opening.group(2).strip(), text[body_start:]))
            return blocks, True
        closing = marks[j]
        blocks.append((opening.start(), closing.end(), opening.group(2).strip(), text[body_start:closing.start()]))
        i = j + 1
    return blocks, False


def _has_statement(text: str) -> bool:
    return any(_START.match(line) for line in text.split("\n"))


def _strip_fences(text: str, changes: list[str]) -> tuple[str, str | None]:
    blocks, unclosed = _fenced_blocks(text)
    if not blocks:
        stripped = text.strip()
        if len(stripped) > 2 and stripped[0] == stripped[-1] == "`" and "`" not in stripped[1:-1]:
            changes.append("backticks stripped")
            i = text.index("`")
            j = text.rindex("`")
            return text[:i] + " " + text[i + 1:j] + " " + text[j + 1:], None
        return text, None
    chosen = blocks
    if len(blocks) > 1:
        chosen = [b for b in blocks if _has_statement(b[3])]
        if len(chosen) > 1:
            return text, (f"your reply holds {len(chosen)} code blocks that each hold a statement: send exactly "
                          "one statement (PLAN, VIEW, STANDDOWN or PASS), without code fences")
        if not chosen:
            chosen = blocks[:1]
    start, end, info, content = chosen[0]
    outside = text[:start] + text[end:]
    for b in blocks:
        if b is not chosen[0]:
            outside = outside.replace(text[b[0]:b[1]], "")
    label = f"```{info}" if info else "```"
    note = f"markdown fence {label} stripped" + (" (never closed)" if unclosed and chosen[0] is blocks[-1] else "")
    if len(blocks) > 1:
        note += f"; {_plural(len(blocks) - 1, 'other code block')} dropped"
    if outside.strip():
        note += f"; prose outside it stripped ({len(outside.strip())} chars)"
    changes.append(note)
    # the content keeps its line numbers: the opening fence line and what precedes it go blank
    body_start = text.index("\n", start) + 1 if "\n" in text[start:] else len(text)
    return _blank(text[:body_start]) + content, None


StatementTest = Callable[[str], bool]
"""Whether a text is one statement as the language reads it (a type error still counts: the
parser's repair text is then the right answer; a syntax error does not)."""

MAX_PARSE_ATTEMPTS = 64
"""The most candidate blocks tried per reply (each a parse); past it the reply is unchanged."""
SHAPE_ERRORS = ("syntax", "empty", "too-large", "not-text", "too-deep", "invalid")


def _before_only(lines: list[str], s: int, changes: list[str]) -> str:
    """The text with only the prose before line `s` (the one statement keyword) blanked."""
    prose = sum(1 for line in lines[:s] if _is_prose(line))
    if not prose:
        return "\n".join(lines)
    changes.append(f"prose before the statement stripped ({_plural(prose, 'line')})")
    return "\n" * s + "\n".join(lines[s:])


def _is_prose(line: str) -> bool:
    """A line that is neither blank nor a `#` comment."""
    body = line.strip()
    return bool(body) and not body.startswith("#")


def is_statement(text: str) -> bool:
    """The language's own test (`kestrel.lang.parse`): one statement that parses, whatever
    its type errors."""
    try:
        node = parse(text)
    except LangError as err:
        return not any(d.code in SHAPE_ERRORS for d in err.diagnostics)
    return not isinstance(node, Module)


def _strip_prose(text: str, changes: list[str], test: StatementTest) -> tuple[str, str | None]:
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if _START.match(line)]
    if not starts:
        return text, None
    budget = MAX_PARSE_ATTEMPTS
    found: list[tuple[int, int]] = []  # (first line, end) of each block that is a statement
    for k, i in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else len(lines)
        for end in range(stop, i, -1):
            if not "".join(lines[i:end]).strip():
                continue
            budget -= 1
            if budget < 0:
                return text, None
            if test("\n".join(lines[i:end])):
                found.append((i, end))
                break
    if not found:
        # no block reads as a statement: the parser's own error is the repair, pointing at the
        # statement itself when one keyword line is all there is (what precedes it is prose)
        return (_before_only(lines, starts[0], changes) if len(starts) == 1 else text), None
    if len(found) > 1:
        named = ", ".join(f"{_START.match(lines[i]).group(1).upper()} on line {i + 1}"  # type: ignore[union-attr]
                          for i, _ in found[:4])
        return text, (f"your reply holds {len(found)} statements ({named}): send exactly one statement, "
                      "alone, with no prose around it")
    s, end = found[0]
    keyword = _START.match(lines[s]).group(1).upper()  # type: ignore[union-attr]
    rest = [i for i in range(end, len(lines)) if _is_prose(lines[i])]
    if rest and _CONTINUE.match(lines[rest[0]]):
        # the statement goes on past what reads: its own error is the repair (prose before it
        # cannot be the statement's, so that goes)
        return _before_only(lines, s, changes), None
    later = [i for i in rest if _CONTINUE.match(lines[i])]
    if later:
        return text, (f"your reply has prose inside the {keyword} (line {rest[0] + 1}, before line {later[0] + 1}): "
                      f"send the {keyword} alone, all its lines together, with no prose before, between or after them")
    before = sum(1 for line in lines[:s] if _is_prose(line))
    after = sum(1 for line in lines[end:] if _is_prose(line))
    if not before and not after:
        return text, None  # only blank lines and comments around it: the language ignores them
    parts = [p for p in (f"{_plural(before, 'line')} before" if before else "",
                         f"{_plural(after, 'line')} after" if after else "") if p]
    changes.append(f"prose around the statement stripped ({' and '.join(parts)})")
    return "\n" * s + "\n".join(lines[s:end]), None


def normalize_reply(text: str, is_statement: StatementTest = is_statement) -> NormalizedReply:
    """What to parse out of `text` (see the module docstring); `is_statement` tells a
    statement from prose (the language's parser by default)."""
    changes: list[str] = []
    body, unclosed = _strip_reasoning(text, changes)
    body, error = _strip_fences(body, changes)
    if error is None:
        body, error = _strip_prose(body, changes, is_statement)
    if error is not None:
        return NormalizedReply(text, tuple(changes), error, unclosed)
    if not changes:
        return NormalizedReply(text)
    return NormalizedReply(body.rstrip(), tuple(changes), None, unclosed)


__all__ = ["CONTINUATION_KEYWORDS", "STATEMENT_KEYWORDS", "NormalizedReply", "normalize_reply"]
