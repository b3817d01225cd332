"""A model agent's spec as one string: provider, model, endpoint, key variable, effort,
constraint, temperature and call limits (`--agent`, `--agents`, a grid file's rows, a
daemon submit).

Syntax (docs/models.md, "Agent specs"):

    PROVIDER:MODEL[@URL][|OPTION=VALUE]...
    openai:gpt-5-mini@http://127.0.0.1:8000/v1|key=LOCAL_KEY|effort=low|rpm=600

`@URL` starts at an `@` followed by `http://` or `https://` (a model name may hold an `@`
itself, e.g. `claude-3-5-sonnet@20240620`). Options, each at most once:

| option | meaning | part of the run's identity |
|---|---|---|
| `key=VAR` | the environment variable holding the API key (`none`: no key) | no |
| `effort=LEVEL` | the reasoning effort (`none minimal low medium high xhigh max`), over the profile's | yes |
| `constrain=MODE` | the reply grammar (`auto off llguidance gbnf ebnf`, as `--constrain`; `kestrel.models.constrain`) | yes |
| `temperature=T` | sampling temperature, 0 to 2 | yes |
| `rpm=N`, `tpm=N` | the endpoint's client-side rate limit (requests, tokens per minute) | no |
| `concurrency=N` | the most calls in flight to the endpoint at once | no |

Invariants: `parse_spec(format())` is the spec again (canonical form: options in the table's
order); `identity` is what decides a run's bytes (provider, model, endpoint, effort,
constraint, temperature), so two specs differing only in how their calls are made (key
variable, rate limits, concurrency) name the same runs.
"""

from __future__ import annotations

import math
import re

import msgspec

from kestrel.models.constrain import CONSTRAIN_CHOICES
from kestrel.providers import lookup
from kestrel.providers import names as provider_names

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
CONSTRAINTS = CONSTRAIN_CHOICES
OPTIONS = ("key", "effort", "constrain", "temperature", "rpm", "tpm", "concurrency")
CALL_OPTIONS = frozenset({"key", "rpm", "tpm", "concurrency"})
"""Options that change how calls are made, never what a run records."""

_URL = re.compile(r"@(?=https?://)")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class AgentSpecError(ValueError):
    """An agent spec that does not parse; the message says what is wrong and how to fix it."""


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed `PROVIDER:MODEL[@URL][|OPTION=VALUE]...` (see the module docstring); None
    fields were not given."""

    provider: str
    model: str
    base_url: str | None = None
    key_env: str | None = None  # "none": the provider needs no key
    effort: str | None = None
    constrain: str | None = None
    temperature: float | None = None
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None

    def format(self, *, identity_only: bool = False) -> str:
        """The canonical spec (options in the documented order); `identity_only` leaves out
        the call options (key variable, rate limits, concurrency)."""
        out = f"{self.provider}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")
        for name, value in self._options():
            if value is not None and not (identity_only and name in CALL_OPTIONS):
                out += f"|{name}={_text(value)}"
        return out

    @property
    def identity(self) -> str:
        """The spec without its call options: what decides a run's bytes."""
        return self.format(identity_only=True)

    def _options(self) -> tuple[tuple[str, object], ...]:
        return (("key", self.key_env), ("effort", self.effort), ("constrain", self.constrain),
                ("temperature", self.temperature), ("rpm", self.rpm), ("tpm", self.tpm),
                ("concurrency", self.concurrency))


def _text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}" if value != int(value) or abs(value) >= 1e16 else str(int(value))
    return str(value)


def _number(name: str, text: str, spec: str, *, low: float, high: float, integer: bool = False) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or not low <= x <= high or (integer and x != int(x)):
        kind = "a whole number" if integer else "a number"
        raise AgentSpecError(f"agent {spec!r}: {name}={text!r} must be {kind} from {low:g} to {high:g}")
    return x


def is_model_spec(text: str) -> bool:
    """True when `text` names a provider of the registry (`PROVIDER:...`)."""
    return lookup(text.partition(":")[0].strip()) is not None


def parse_spec(text: str) -> ModelSpec:
    """The model spec `text` (see the module docstring), or `AgentSpecError` naming the problem."""
    spec = text.strip()
    head, *opts = spec.split("|")
    kind, sep, rest = head.partition(":")
    provider = kind.strip().lower()
    if lookup(provider) is None:
        raise AgentSpecError(f"agent {spec!r}: unknown provider {kind.strip()!r}: use one of {', '.join(provider_names())}")
    parts = _URL.split(rest, maxsplit=1)
    model = parts[0].strip()
    url = parts[1].strip() if len(parts) > 1 else None
    if not sep or not model:
        raise AgentSpecError(f"agent {spec!r}: name the model: {provider}:MODEL")
    if url is not None and (not re.fullmatch(r"https?://\S+", url)):
        raise AgentSpecError(f"agent {spec!r}: the endpoint {url!r} is not an http(s) URL, e.g. @http://127.0.0.1:8000/v1")
    seen: set[str] = set()
    key_env = effort = constrain = None
    temperature = rpm = tpm = None
    concurrency: int | None = None
    for opt in opts:
        name, eq, value = opt.partition("=")
        name, value = name.strip().lower(), value.strip()
        if name not in OPTIONS or not eq:
            raise AgentSpecError(f"agent {spec!r}: unknown option {opt.strip()!r}: use "
                            + ", ".join(f"{o}=..." for o in OPTIONS))
        if name in seen:
            raise AgentSpecError(f"agent {spec!r}: option {name} is given twice")
        seen.add(name)
        if name == "key":
            if value.lower() != "none" and not _ENV.fullmatch(value):
                raise AgentSpecError(f"agent {spec!r}: key={value!r} must name an environment variable (or none)")
            key_env = "none" if value.lower() == "none" else value
        elif name == "effort":
            if value.lower() not in EFFORTS:
                raise AgentSpecError(f"agent {spec!r}: effort={value!r}: use one of {' '.join(EFFORTS)}")
            effort = value.lower()
        elif name == "constrain":
            if value.lower() not in CONSTRAINTS:
                raise AgentSpecError(f"agent {spec!r}: constrain={value!r}: use one of {' '.join(CONSTRAINTS)}")
            constrain = value.lower()
        elif name == "temperature":
            temperature = _number(name, value, spec, low=0.0, high=2.0)
        elif name == "rpm":
            rpm = _number(name, value, spec, low=1e-6, high=1e12)
        elif name == "tpm":
            tpm = _number(name, value, spec, low=1e-6, high=1e12)
        else:
            concurrency = int(_number(name, value, spec, low=1, high=10_000, integer=True))
    return ModelSpec(provider=provider, model=model, base_url=url, key_env=key_env, effort=effort,
                     constrain=constrain, temperature=temperature, rpm=rpm, tpm=tpm, concurrency=concurrency)


def identity(agent: str) -> str:
    """What decides the bytes of a run by `agent`: a model spec's identity (canonical, without
    its call options), any other agent as written."""
    return parse_spec(agent).identity if is_model_spec(agent) else agent.strip()


__all__ = ["CALL_OPTIONS", "CONSTRAINTS", "EFFORTS", "OPTIONS", "ModelSpec", "AgentSpecError", "identity",
           "is_model_spec", "parse_spec"]
