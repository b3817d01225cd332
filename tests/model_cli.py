"""Helpers shared by the model-agent CLI tests: run `kestrel` in process, point an agent at the
loopback model server (tests/model_server.py), read evidence files and `--json` turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from model_server import ModelServer


run = run_cli


def agent_args(provider: str, model: str, srv: ModelServer) -> list[str]:
    url = srv.openai_url if provider == "openai" else srv.anthropic_url
    return ["--agent", f"{provider}:{model}", "--base-url", url]


def evidence(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def turns(out: str) -> list[dict[str, Any]]:
    return [t for d in json.loads(out)["days"] for t in d["turns"]]
