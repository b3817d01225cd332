"""Shared test configuration: every async test runs on asyncio AND trio."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

pytest_plugins = ["actor_fixtures"]  # the actor tests' shared fixtures (the `clock`)

from shared_paths import SHARED_DATA


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def shared_data() -> Path:
    """The real market data folder; skips the test cleanly when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared market data not present at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """No test leaks a process-wide structlog configuration into the next one."""
    yield
    structlog.reset_defaults()
