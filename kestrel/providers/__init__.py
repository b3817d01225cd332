"""The model provider registry: data, not code branches.

One table (`providers.toml`, packaged with this module) maps a provider name to its wire format
(which SDK adapter speaks to it), its default base URL, the environment variable of its key
(or none, for a local server), whose effort vocabulary applies, how it caches prompts and how
its calls are priced, and where a request carries the grammar of a constrained reply (in which
exported dialect, for which models). The CLI (and through it the daemon's submits), the modes, the effort
gating and the cost read it.

Invariants: names are unique, lower-case identifiers distinct from the built-in agent kinds;
a base URL is empty or an http(s) URL; a key variable is empty or an environment-variable name;
a grammar field has a dialect it takes and a wire it is defined for (`none`: no dialect).
"""

from kestrel.providers.registry import (
    BUILTIN_AGENTS,
    FIELD_DIALECTS,
    Dialect,
    GrammarField,
    Provider,
    RegistryError,
    TABLE_ENV,
    Wire,
    agent_kinds,
    load_registry,
    lookup,
    names,
    registry,
)

__all__ = [
    "TABLE_ENV",
    "BUILTIN_AGENTS",
    "FIELD_DIALECTS",
    "Dialect",
    "GrammarField",
    "Provider",
    "RegistryError",
    "Wire",
    "agent_kinds",
    "load_registry",
    "lookup",
    "names",
    "registry",
]
