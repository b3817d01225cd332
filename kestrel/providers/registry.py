"""The provider table, read and validated once (see the package docstring)."""

from __future__ import annotations

import fnmatch
import math
import os
import re
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import msgspec

Wire = Literal["openai-chat", "anthropic-messages"]
"""A request/response format and the SDK adapter that speaks it."""

EffortFamily = Literal["openai", "anthropic", "gemini", "openrouter", "none"]
PromptCaching = Literal["automatic", "explicit", "none"]

GrammarField = Literal["custom-tool", "structured-outputs", "grammar", "ebnf", "none"]
"""Where a request carries the grammar a constrained reply is decoded under (see
providers.toml's header)."""

Dialect = Literal["llguidance", "gbnf", "ebnf"]
"""The exported grammar dialects (`kestrel.lang.dialects.DIALECTS`, the same names)."""

FIELD_DIALECTS: dict[str, tuple[Dialect, ...]] = {
    "custom-tool": ("llguidance",),
    "structured-outputs": ("ebnf", "llguidance"),
    "grammar": ("gbnf", "llguidance"),
    "ebnf": ("ebnf",),
    "none": (),
}
"""The dialects each grammar field takes, the row's default first among those it may name."""

FIELD_WIRES: dict[str, tuple[str, ...]] = {
    "custom-tool": ("openai-chat",),
    "structured-outputs": ("openai-chat",),
    "grammar": ("openai-chat",),
    "ebnf": ("openai-chat",),
    "none": ("openai-chat", "anthropic-messages"),
}
"""The wire formats a grammar field is defined for."""

BUILTIN_AGENTS: tuple[str, ...] = ("baseline", "fixed", "recorded", "replies")
"""The agent kinds that are not model providers (`baseline`, `fixed:PLAN`, ...)."""

WIRE_SDK: dict[str, str] = {"openai-chat": "openai", "anthropic-messages": "anthropic"}
"""The Python package (and pip extra) each wire format's adapter needs."""

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class RegistryError(ValueError):
    """A provider table that does not validate: the message names the row and the field."""


class Provider(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One row of the registry (the field meanings are in providers.toml's header)."""

    name: str
    wire: Wire
    base_url: str = ""
    key_env: str = ""
    effort: EffortFamily = "none"
    prompt_caching: PromptCaching = "none"
    prices: str = ""
    grammar: GrammarField = "none"
    dialect: Dialect | None = None
    grammar_models: tuple[str, ...] = ("*",)
    rpm: float | None = None
    tpm: float | None = None
    description: str = ""

    @property
    def sdk(self) -> str:
        """The SDK package the adapter imports (`openai`, `anthropic`), also its pip extra."""
        return WIRE_SDK[self.wire]

    @property
    def needs_key(self) -> bool:
        return bool(self.key_env)

    @property
    def default_base_url(self) -> str | None:
        return self.base_url or None

    def takes_grammar(self, model: str) -> bool:
        """Whether `model` takes the row's grammar: the first of `grammar_models` (fnmatch on the
        lower-case model name; `!PATTERN` excludes) that matches decides; none matching: no."""
        if self.grammar == "none":
            return False
        name = model.strip().lower()
        for pattern in self.grammar_models:
            negated = pattern.startswith("!")
            if fnmatch.fnmatchcase(name, pattern.removeprefix("!")):
                return not negated
        return False


class _Table(msgspec.Struct, frozen=True):
    providers: tuple[Provider, ...]


def load_registry(text: str, source: str = "providers.toml") -> tuple[Provider, ...]:
    """The rows of a provider table in TOML, validated (`RegistryError` names what is wrong)."""
    try:
        raw = tomllib.loads(text)
        rows = msgspec.convert(raw, _Table).providers
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise RegistryError(f"{source}: {exc}") from None
    seen: set[str] = set()
    for i, row in enumerate(rows, 1):
        where = f"{source}: provider {i} ({row.name!r})"
        if not _NAME.fullmatch(row.name):
            raise RegistryError(f"{where}: name must be a lower-case identifier such as 'openai'")
        if row.name in seen or row.name in BUILTIN_AGENTS:
            raise RegistryError(f"{where}: the name is taken (by another row or a built-in agent)")
        seen.add(row.name)
        if row.base_url and not row.base_url.startswith(("http://", "https://")):
            raise RegistryError(f"{where}: base_url must be empty or an http(s) URL")
        if row.key_env and not _ENV.fullmatch(row.key_env):
            raise RegistryError(f"{where}: key_env must be empty or an environment variable name")
        for field, value in (("rpm", row.rpm), ("tpm", row.tpm)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise RegistryError(f"{where}: {field} must be a number > 0 (per minute), or left out for no limit")
        _check_grammar(row, where)
    return rows


def _check_grammar(row: Provider, where: str) -> None:
    if row.wire not in FIELD_WIRES[row.grammar]:
        raise RegistryError(f"{where}: grammar {row.grammar!r} is not defined for wire {row.wire!r}: "
                            "use grammar = \"none\"")
    taken = FIELD_DIALECTS[row.grammar]
    if row.grammar == "none" and row.dialect is not None:
        raise RegistryError(f"{where}: dialect is set but grammar is \"none\": remove the dialect")
    if row.grammar != "none" and row.dialect not in taken:
        raise RegistryError(f"{where}: grammar {row.grammar!r} takes dialect {' or '.join(taken)}, "
                            f"got {row.dialect!r}")
    if not row.grammar_models or not all(p.removeprefix("!") for p in row.grammar_models):
        raise RegistryError(f"{where}: grammar_models must list model-name patterns (\"*\": every model)")


TABLE_ENV = "KESTREL_PROVIDERS"
"""The environment variable naming a provider table (TOML, the packaged file's format) to use
instead of the packaged one: a deployment's own rows (endpoints, rate limits) without editing
the package."""


@cache
def registry() -> tuple[Provider, ...]:
    """The provider table, in file order: the packaged one, or the file `KESTREL_PROVIDERS`
    names (`RegistryError` when it cannot be read or does not validate)."""
    path = os.environ.get(TABLE_ENV, "").strip()
    if not path:
        text = resources.files("kestrel.providers").joinpath("providers.toml").read_text("utf-8")
        return load_registry(text)
    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{TABLE_ENV}={path}: cannot read the provider table: {exc}") from None
    return load_registry(text, source=f"{TABLE_ENV}={path}")


def lookup(name: str) -> Provider | None:
    """The row called `name` (case-insensitive, surrounding spaces ignored), if any."""
    wanted = name.strip().lower()
    return next((row for row in registry() if row.name == wanted), None)


def names() -> tuple[str, ...]:
    """The provider names, sorted."""
    return tuple(sorted(row.name for row in registry()))


def agent_kinds() -> tuple[str, ...]:
    """Every kind an `--agent` spec or a mode may name: the built-in agents and the providers."""
    return tuple(sorted(BUILTIN_AGENTS + names()))
