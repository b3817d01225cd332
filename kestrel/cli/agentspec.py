"""`--agent` specs: which agent a run uses, read and validated before anything runs."""

from __future__ import annotations

import datetime as dt
import importlib.util
import ipaddress
import os
from urllib.parse import urlsplit
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.errors import MissingKeyError, UsageError
from kestrel.providers import lookup
from kestrel.providers import names as provider_names

if TYPE_CHECKING:  # imported lazily at run time (start-up cost)
    from kestrel.market import MarketData
    from kestrel.models.adapter import ModelAgent
    from kestrel.models.callpolicy import CallPolicy
    from kestrel.models.spec import ModelSpec
    from kestrel.session.options import SessionOptions
    from kestrel.session.protocol import Agent

AGENT_HELP = ("baseline, fixed:PLAN.kes, recorded:CAPTURE.jsonl, replies:FILE or PROVIDER:MODEL (providers: "
              + ", ".join(provider_names()) + ")")


def agent_of(
    spec: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout_s: float | None = None,
    panes: tuple[str, ...] | None = None,
    content: bytes | None = None,
    policy: CallPolicy | None = None,
    constrain: str | None = None,
    reason_first: bool = False,
) -> Agent:
    """The agent named by `--agent`; a plan file, capture or replies file is read and
    validated here, and a model agent's SDK, model name and API key are checked, so a bad one
    fails the command up front (exit 2) with the error and its place. `content`, when given,
    is that file's bytes as read earlier (the daemon keeps them with the run, so a resumed run
    plays the file as it was at submit, not as it is now); the agent is the one the file gives.
    A model agent may be a full spec (`kestrel.models.spec`: `PROVIDER:MODEL@URL|key=VAR|...`);
    its options fill what the flags leave unset (a flag and an option naming different values
    is refused), and `policy` is how its calls are made (its `rpm=`/`tpm=`/`concurrency=`
    options add a limiter and call slots to it). `constrain` and `reason_first` are the
    reply grammar choice (`--constrain`, a spec's `constrain=`) and the free reasoning call."""
    from kestrel.agents.baseline import BaselineAgent
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.agents.replies import RepliesAgent

    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if lookup(kind) is not None:
        if not ("|" in spec or "@http" in spec):
            return model_agent(kind, arg.strip(), model=model, base_url=base_url,
                               api_key_env=api_key_env, timeout_s=timeout_s, panes=panes,
                               policy=row_policy(kind, policy), constrain=constrain, reason_first=reason_first)
        ms = model_spec(spec)
        if base_url is not None and ms.base_url is not None and base_url != ms.base_url:
            raise UsageError(f"--agent {spec} names the endpoint {ms.base_url} and --base-url {base_url}: give one")
        if api_key_env is not None and ms.key_env is not None and api_key_env != ms.key_env:
            raise UsageError(f"--agent {spec} names the key variable {ms.key_env} and --api-key-env "
                             f"{api_key_env}: give one")
        if constrain is not None and ms.constrain is not None and constrain.strip().lower() != ms.constrain:
            raise UsageError(f"--agent {spec} names constrain={ms.constrain} and --constrain {constrain}: give one")
        return model_agent(ms.provider, ms.model, model=model, base_url=base_url or ms.base_url,
                           api_key_env=api_key_env or ms.key_env, timeout_s=timeout_s, panes=panes,
                           policy=spec_policy(ms, policy), temperature=ms.temperature,
                           constrain=ms.constrain if ms.constrain is not None else constrain,
                           reason_first=reason_first)
    if kind == "baseline" and not arg:
        return BaselineAgent()
    if kind in ("fixed", "recorded", "replies") and arg and content is not None:
        return _agent_from_bytes(kind, arg, content)
    if kind in ("fixed", "recorded", "replies") and arg:
        try:
            if kind == "fixed":
                return FixedAgent.from_file(arg)
            return RecordedAgent.from_file(arg) if kind == "recorded" else RepliesAgent.from_file(arg)
        except ValueError as exc:  # PlanFileError, CaptureError, RepliesError
            raise UsageError(str(exc)) from None
    raise UsageError(f"unknown --agent {spec!r}: use {AGENT_HELP}")


def read_agent_input(spec: str | None) -> bytes | None:
    """The bytes of the file `spec` names (`fixed:`, `recorded:`, `replies:`), None for other
    agents; `UsageError` when it cannot be read."""
    from pathlib import Path

    from kestrel.cli.dataflags import agent_input

    path = agent_input(spec)
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the --agent file {path!r}: {exc.strerror}") from None


def _agent_from_bytes(kind: str, path: str, content: bytes) -> Agent:
    """What `FixedAgent/RecordedAgent/RepliesAgent.from_file(path)` gives for a file holding
    `content` (same agent id, same error texts)."""
    from pathlib import Path

    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.agents.replies import RepliesAgent, split_replies
    from kestrel.session.capture import decode_capture

    p = Path(path)
    try:
        if kind == "recorded":
            header, turns = decode_capture(content, source=p.name)
            return RecordedAgent(turns, agent_id=header.agent, header=header)
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        if kind == "fixed":
            return FixedAgent(text, name=p.stem, source=path)
        return RepliesAgent(split_replies(text), name=p.stem, source=path)
    except ValueError as exc:  # PlanFileError, CaptureError, RepliesError
        raise UsageError(str(exc)) from None


def model_agent(
    provider: str,
    spec_model: str,
    *,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    timeout_s: float | None,
    panes: tuple[str, ...] | None = None,
    policy: CallPolicy | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    constrain: str | None = None,
    reason_first: bool = False,
) -> ModelAgent:
    """A `PROVIDER:MODEL` agent of the provider registry: the model from the spec or
    `--model`/the mode, the key from the provider's variable or `--api-key-env` (none for a
    provider that needs no key), `--base-url` (else the provider's default) handed to the SDK,
    the system prompt listing only `panes` (a mode's restriction; None: every pane), the reply
    grammar `constrain` resolves to (None: auto) and, with `reason_first` and a grammar, a
    second client for the free reasoning call. The SDK is imported and the clients built here,
    before the session, so no call pays for it. `--api-key-env none` needs no key; so does a
    server on this machine (`--base-url` on localhost or a loopback address) when no key
    variable is set."""
    from kestrel.frame import DEFAULT_CATALOG
    from kestrel.models.adapter import DEFAULT_TIMEOUT_S, ModelAgent, ModelConfig, ModelError
    from kestrel.models.card import render_card
    from kestrel.models.constrain import ConstrainError, resolve_constraint
    from kestrel.models.wires import WIRES

    if spec_model and model and spec_model != model:
        raise UsageError(
            f"--agent {provider}:{spec_model} and --model {model} name different models: give one"
        )
    name = spec_model or model
    if not name:
        raise UsageError(f"--agent {provider} needs a model: write {provider}:MODEL or pass --model MODEL")
    row = lookup(provider)
    if row is None:
        raise UsageError(f"unknown provider {provider!r}: use one of {', '.join(provider_names())}")
    if importlib.util.find_spec(row.sdk) is None:
        raise UsageError(
            f"--agent {provider}:{name} needs the {row.sdk} SDK: pip install 'kestrel[{row.sdk}]'"
        )
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url {base_url!r} is not an http(s) URL: e.g. http://127.0.0.1:8000/v1")
    keyless = api_key_env is not None and api_key_env.strip().lower() == NO_KEY
    env = "" if keyless else (api_key_env or row.key_env)
    key = os.environ.get(env, "") if env else NOT_NEEDED  # the SDKs refuse an empty key
    if not key.strip() and api_key_env is None and is_loopback(base_url or row.default_base_url):
        key = NOT_NEEDED  # a server on this machine: no key unless it is given
    if not key.strip():
        raise MissingKeyError(
            f"missing API key for {provider}:{name}: set the environment variable {env}"
            + ("" if api_key_env else " (or name another variable with --api-key-env NAME, or "
               "--api-key-env none for a server that needs no key)"),
            f"{provider}:{name}", env,
        )
    try:
        constraint = resolve_constraint(row.name, name, constrain)
    except ConstrainError as exc:
        raise UsageError(str(exc)) from None
    try:
        config = ModelConfig(row.name, name, base_url=base_url or row.default_base_url,
                             timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S,
                             constraint=constraint, temperature=temperature, seed=seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    wire = WIRES[row.wire](config, key)
    reasoner = None
    if reason_first and constraint is not None:
        reasoner = WIRES[row.wire](msgspec.structs.replace(config, constraint=None), key)
    try:
        wire.connect()
        if reasoner is not None:
            reasoner.connect()
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    system = None if panes is None else render_card(DEFAULT_CATALOG.only(panes))
    try:
        return ModelAgent(config, wire, system=system, policy=policy, reasoner=reasoner)
    except ModelError as exc:  # a USD cap on a model the price table does not know
        raise UsageError(str(exc)) from None


def is_model_agent(agent: object) -> bool:
    """Whether `agent` is a model agent (its `model` names a model of a provider)."""
    from kestrel.models.adapter import ModelAgent

    return isinstance(agent, ModelAgent)


def model_spec(spec: str) -> ModelSpec:
    """`spec` parsed as a model agent's spec (`UsageError` naming what is wrong)."""
    from kestrel.models.spec import AgentSpecError, parse_spec

    try:
        ms = parse_spec(spec)
    except AgentSpecError as exc:
        raise UsageError(str(exc)) from None
    return ms


def spec_policy(ms: ModelSpec, policy: CallPolicy | None) -> CallPolicy | None:
    """`policy` with the spec's rate limit (`rpm=`, `tpm=`; each the provider row's when the spec
    gives none) and call slots (`concurrency=`) for its endpoint when `policy` has none of its
    own (a single run's: one limiter, one pool)."""
    from dataclasses import replace

    from kestrel.models.callpolicy import CallPolicy
    from kestrel.models.limiter import RateLimit, RateLimiter
    from kestrel.models.slots import CallSlots

    from kestrel.cli.callflags import endpoint_rate

    rpm, tpm = endpoint_rate(ms.provider, ms.rpm, ms.tpm)  # a limit the spec leaves out: the provider row's
    if rpm is None and tpm is None and ms.concurrency is None:
        return policy
    base = policy if policy is not None else CallPolicy()
    limiter = base.limiter
    if limiter is None and (rpm is not None or tpm is not None):
        limiter = RateLimiter(RateLimit(requests_per_minute=rpm, tokens_per_minute=tpm), clock=base.clock)
    slots = base.slots if base.slots is not None or ms.concurrency is None else CallSlots(ms.concurrency)
    return replace(base, limiter=limiter, slots=slots)


def row_policy(provider: str, policy: CallPolicy | None) -> CallPolicy | None:
    """`policy` with the provider row's rate limit (`rpm`, `tpm` in providers.toml) when it has
    no limiter of its own (a plain `PROVIDER:MODEL` spec names none)."""
    from dataclasses import replace

    from kestrel.cli.callflags import endpoint_rate
    from kestrel.models.callpolicy import CallPolicy
    from kestrel.models.limiter import RateLimit, RateLimiter

    rpm, tpm = endpoint_rate(provider, None, None)
    if (rpm is None and tpm is None) or (policy is not None and policy.limiter is not None):
        return policy
    base = policy if policy is not None else CallPolicy()
    return replace(base, limiter=RateLimiter(RateLimit(requests_per_minute=rpm, tokens_per_minute=tpm),
                                             clock=base.clock))


NO_KEY = "none"
"""`--api-key-env none`: the server needs no API key (a local OpenAI-compatible server)."""
NOT_NEEDED = "not-needed"
"""What the SDK is handed when no key is needed (the SDKs refuse an empty one)."""


def is_loopback(url: str | None) -> bool:
    """Whether `url` names a server on this machine (localhost, 127.0.0.0/8, ::1)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_agent_fits(agent: Agent, data: MarketData, options: SessionOptions, date: dt.date | None,
                     days: int, spec: str) -> None:
    """Fail up front when the agent cannot play this run: a fixed plan the engine would refuse
    (another instrument, ...), or a capture recorded for other sessions or another schedule."""
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.engine.engine import Engine
    from kestrel.session.runner import engine_config, session_days

    plan = session_days(data, options, date, days)
    sessions = [d.session for d in plan]
    schedule = [o.label for o in plan[0].ordinals]
    source = spec.partition(":")[2]
    if isinstance(agent, FixedAgent):
        try:
            Engine(engine_config(options, data), sessions[0], data.symbol, data.tick_size).arm(agent.plan)
        except ValueError as exc:
            raise UsageError(f"{source}: the engine refuses plan {agent.plan.name!r}: {exc}") from None
    if isinstance(agent, RecordedAgent) and agent.header is not None:
        h = agent.header
        want = [(s.date.isoformat(), o) for s in sessions for o in schedule]
        if agent.slots() != want or h.symbol != data.symbol:
            raise UsageError(
                f"{source} holds turns for {h.symbol} on {', '.join(h.dates)} at "
                f"{' '.join(h.schedule)}, but this run is {data.symbol} on "
                f"{', '.join(s.date.isoformat() for s in sessions)} at {' '.join(schedule)}: "
                f"use `kestrel replay {source}` (it reads the session from the capture) or "
                "pass matching --data/--date/--days/--checkpoints"
            )


__all__ = ["AGENT_HELP", "NO_KEY", "agent_of", "check_agent_fits", "is_loopback", "is_model_agent", "model_agent",
           "model_spec", "read_agent_input", "spec_policy"]
