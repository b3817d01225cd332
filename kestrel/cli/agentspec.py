"""`--agent` specs: which agent a run uses, read and validated before anything runs."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
from typing import TYPE_CHECKING

import msgspec

from kestrel.cli.errors import UsageError
from kestrel.providers import lookup
from kestrel.providers import names as provider_names

if TYPE_CHECKING:  # imported lazily at run time (start-up cost)
    from kestrel.market import MarketData
    from kestrel.models.adapter import ModelAgent
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
    constrain: str | None = None,
    reason_first: bool = False,
) -> Agent:
    """The agent named by `--agent`; a plan file, capture or replies file is read and
    validated here, and a model agent's SDK, model name and API key are checked, so a bad one
    fails the command up front (exit 2) with the error and its place. `content`, when given,
    is that file's bytes as read earlier (the daemon keeps them with the run, so a resumed run
    plays the file as it was at submit, not as it is now); the agent is the one the file gives."""
    from kestrel.agents.baseline import BaselineAgent
    from kestrel.agents.fixed import FixedAgent
    from kestrel.agents.recorded import RecordedAgent
    from kestrel.agents.replies import RepliesAgent

    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if lookup(kind) is not None:
        return model_agent(kind, arg.strip(), model=model, base_url=base_url,
                           api_key_env=api_key_env, timeout_s=timeout_s, panes=panes,
                           constrain=constrain, reason_first=reason_first)
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
    constrain: str | None = None,
    reason_first: bool = False,
) -> ModelAgent:
    """A `PROVIDER:MODEL` agent of the provider registry: the model from the spec or
    `--model`/the mode, the key from the provider's variable or `--api-key-env` (none for a
    provider that needs no key), `--base-url` (else the provider's default) handed to the SDK,
    the system prompt listing only `panes` (a mode's restriction; None: every pane), the reply
    grammar `constrain` resolves to (None: auto) and, with `reason_first` and a grammar, a
    second client for the free reasoning call. The SDK is imported and the clients built here,
    before the session, so no call pays for it."""
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
    env = api_key_env or row.key_env
    key = os.environ.get(env, "") if env else "not-needed"  # the SDKs refuse an empty key
    if not key.strip():
        raise UsageError(
            f"missing API key for {provider}:{name}: set the environment variable {env}"
            + ("" if api_key_env else " (or name another variable with --api-key-env NAME)")
        )
    try:
        constraint = resolve_constraint(row.name, name, constrain)
    except ConstrainError as exc:
        raise UsageError(str(exc)) from None
    try:
        config = ModelConfig(row.name, name, base_url=base_url or row.default_base_url,
                             timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S,
                             constraint=constraint)
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
    return ModelAgent(config, wire, system=system, reasoner=reasoner)


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


__all__ = ["AGENT_HELP", "agent_of", "check_agent_fits", "model_agent", "read_agent_input"]
