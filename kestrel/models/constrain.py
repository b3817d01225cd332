"""Constrained replies: Kestrel's reply grammar sent where a provider's request takes one, and
the reply read from where that provider returns it.

The provider registry says, per row, which request field takes a grammar (`grammar`), in which
exported dialect by default (`dialect`) and for which models (`grammar_models`);
`resolve_constraint` turns `--constrain auto|off|DIALECT` into a `Constraint` (or None: no
grammar is sent) and `with_constraint` / `constrained_reply` are the request-building and
reply-reading of that path, which the wire adapters call:

| field | request | reply |
|---|---|---|
| `custom-tool` (OpenAI) | `tools: [{type: custom, custom: {name, description, format: {type: grammar, grammar: {syntax: lark, definition}}}}]`, `tool_choice` that tool | the tool call's `custom.input` |
| `structured-outputs` (vLLM) | `structured_outputs: {grammar}` | `message.content` |
| `grammar` (llama.cpp server) | `grammar` (an LLGuidance grammar after a `%llguidance {}` line) | `message.content` |
| `ebnf` (SGLang) | `ebnf` | `message.content` |

Invariants:
- the grammar sent is `kestrel.lang.dialects.export(dialect)` of one statement (a reply is one
  statement), byte for byte, so every reply it admits passes Kestrel's syntax stage; the repair
  loop still checks every reply (types, limits, a server that ignored the field);
- a field the SDK does not know travels in `extra_body`, merged with any other extra fields;
- a custom-tool reply without the tool call (a model that answered in text) is read from the
  message's content, so the loop sees what the model said;
- `resolve_constraint` fails closed: an explicit dialect the provider or model does not take is
  a `ConstrainError` naming the provider, the model and what it takes;
- `reasoning_messages` / `statement_messages` are the two requests of reason-first: a free call
  whose last user message asks for the reasoning only, then the constrained call with that
  reasoning as the assistant's turn and the reply rule as the last user message (messages
  alternate user / assistant, as every chat template wants).
Pure: no SDK, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from kestrel.lang.dialects import DIALECTS, export
from kestrel.models.card import REPLY_RULE
from kestrel.models.conversation import EMPTY_REPLY, Message
from kestrel.providers import FIELD_DIALECTS, Dialect, GrammarField, lookup

CONSTRAIN_CHOICES: Final[tuple[str, ...]] = ("auto", "off", *DIALECTS)
"""What `--constrain` (and a mode's `constrain`) may say; auto is the default."""

TOOL_NAME: Final = "kestrel_reply"
TOOL_DESCRIPTION: Final = (
    "Your reply: exactly one Kestrel statement (PLAN, VIEW, STANDDOWN or PASS), as the system "
    "prompt describes. Reason first, then call this tool with the statement."
)
LLGUIDANCE_HEADER: Final = "%llguidance {}\n"
"""The first line that makes llama.cpp hand a grammar to LLGuidance instead of its GBNF parser."""

REASON_FIRST: Final = (
    "Before you answer, reason in plain prose: what the briefing shows, the risks, and which "
    "statement fits. Do not write the statement yet: the next message asks for it."
)
STATEMENT_NOW: Final = "Now give your reply. " + REPLY_RULE
REASON_FIRST_NOTE: Final = (
    "reason-first: each reply is a free reasoning call, then the constrained statement with that "
    "reasoning as context; the reply's usage and latency are both calls'"
)


class ConstrainError(ValueError):
    """A `--constrain` choice that cannot be sent (the text names what is accepted)."""


class Constraint(msgspec.Struct, frozen=True):
    """What a constrained request carries: the registry's field, the dialect and the grammar
    text exactly as sent."""

    field: GrammarField
    dialect: Dialect
    grammar: str

    def describe(self) -> str:
        return f"{self.dialect} grammar in {FIELD_TEXT[self.field]}"


FIELD_TEXT: Final[dict[str, str]] = {
    "custom-tool": "a custom tool",
    "structured-outputs": "structured_outputs.grammar",
    "grammar": "grammar",
    "ebnf": "ebnf",
    "none": "no field",
}


def grammar_text(field: GrammarField, dialect: Dialect) -> str:
    """The grammar a request of `field` carries in `dialect` (one statement)."""
    text = export(dialect)
    return LLGUIDANCE_HEADER + text if field == "grammar" and dialect == "llguidance" else text


def resolve_constraint(provider: str, model: str, choice: str | None = None) -> Constraint | None:
    """The constraint `choice` (None: auto) means for `model` of registry row `provider`:
    off: None; auto: the row's field in its default dialect when the model takes it, else None;
    a dialect: that dialect, or `ConstrainError` when the row or the model does not take it."""
    choice = "auto" if choice is None else choice.strip().lower()
    if choice not in CONSTRAIN_CHOICES:
        raise ConstrainError(f"unknown --constrain {choice!r}: use one of {', '.join(CONSTRAIN_CHOICES)}")
    row = lookup(provider)
    if choice == "off" or row is None:
        return None
    if row.grammar == "none" or row.dialect is None:
        if choice == "auto":
            return None
        raise ConstrainError(
            f"--constrain {choice}: provider {row.name} takes no grammar (its requests have no grammar "
            "field; the repair loop checks every reply): use --constrain off or auto")
    if not row.takes_grammar(model):
        if choice == "auto":
            return None
        raise ConstrainError(
            f"--constrain {choice}: model {model} of {row.name} takes no grammar in {FIELD_TEXT[row.grammar]} "
            f"(the models that do: {', '.join(row.grammar_models)}): use --constrain off or auto")
    if choice == "auto":
        return Constraint(row.grammar, row.dialect, grammar_text(row.grammar, row.dialect))
    taken = FIELD_DIALECTS[row.grammar]
    if choice not in taken:
        raise ConstrainError(
            f"--constrain {choice}: {row.name} takes its grammar ({FIELD_TEXT[row.grammar]}) in "
            f"{' or '.join(taken)}: use --constrain {taken[0]} (or auto)")
    dialect = next(d for d in taken if d == choice)
    return Constraint(row.grammar, dialect, grammar_text(row.grammar, dialect))


def constraint_fields(constraint: Constraint) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` that carry the grammar (fields the
    SDK does not know are under `extra_body`)."""
    if constraint.field == "custom-tool":
        tool = {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": constraint.grammar}}}
        return {"tools": [{"type": "custom", "custom": tool}],
                "tool_choice": {"type": "custom", "custom": {"name": TOOL_NAME}}}
    if constraint.field == "structured-outputs":
        return {"extra_body": {"structured_outputs": {"grammar": constraint.grammar}}}
    if constraint.field in ("grammar", "ebnf"):
        return {"extra_body": {constraint.field: constraint.grammar}}
    raise ConstrainError(f"no request field for grammar {constraint.field!r}")


def prompt_text(constraint: Constraint | None) -> str:
    """The text a constraint adds to the model's prompt (a custom tool's definition is part of
    what the model reads and is billed as input; a server-side grammar only masks tokens)."""
    if constraint is None or constraint.field != "custom-tool":
        return ""
    return f"{TOOL_NAME} {TOOL_DESCRIPTION} {constraint.grammar}"


def with_constraint(body: dict[str, Any], constraint: Constraint | None) -> dict[str, Any]:
    """`body` (the keyword arguments of a Chat Completions call) with the grammar fields of
    `constraint` added (`extra_body` merged); `body` itself when there is no constraint."""
    if constraint is None:
        return body
    fields = constraint_fields(constraint)
    extra = {**body.get("extra_body", {}), **fields.pop("extra_body", {})}
    out = {**body, **fields}
    if extra:
        out["extra_body"] = extra
    return out


def constrained_reply(constraint: Constraint | None, message: object, content: str | None) -> str | None:
    """The reply text of a Chat Completions `message` (plain data) whose `content` was already
    read: a custom-tool constraint's tool call input (the first call of the tool whose input is
    text), else `content`."""
    if constraint is None or constraint.field != "custom-tool" or not isinstance(message, Mapping):
        return content
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        custom = call.get("custom") if isinstance(call, Mapping) else None
        if (isinstance(custom, Mapping) and call.get("type") == "custom" and custom.get("name") == TOOL_NAME
                and isinstance(custom.get("input"), str)):
            return str(custom["input"])
    return content


def reasoning_messages(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The free call of reason-first: the conversation with its last user message asking for
    the reasoning only."""
    if not messages or messages[-1].role != "user":
        raise ValueError("a conversation to answer ends with a user message")
    last = messages[-1]
    return (*messages[:-1], Message("user", f"{last.content}\n\n{REASON_FIRST}"))


def statement_messages(messages: tuple[Message, ...], reasoning: str) -> tuple[Message, ...]:
    """The constrained call of reason-first: the free call's messages, its reasoning as the
    assistant's turn, then the reply rule."""
    return (*reasoning_messages(messages), Message("assistant", reasoning.strip() or EMPTY_REPLY),
            Message("user", STATEMENT_NOW))


__all__ = [
    "CONSTRAIN_CHOICES",
    "FIELD_TEXT",
    "LLGUIDANCE_HEADER",
    "REASON_FIRST",
    "REASON_FIRST_NOTE",
    "STATEMENT_NOW",
    "TOOL_NAME",
    "ConstrainError",
    "Constraint",
    "constrained_reply",
    "constraint_fields",
    "grammar_text",
    "prompt_text",
    "reasoning_messages",
    "resolve_constraint",
    "statement_messages",
    "with_constraint",
]
