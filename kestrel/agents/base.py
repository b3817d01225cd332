"""What the single-shot built-in agents share: the `Agent` protocol's declarations.

A single-shot agent never enters the iterative authoring loop (`iterative = False`), answers
inline (`blocking = False`), has no model, and is identified in captures by `agent_id`.
"""

from __future__ import annotations

from typing import ClassVar


class SingleShotAgent:
    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, agent_id: str) -> None:
        self._agent_id = agent_id

    @property
    def agent_id(self) -> str:
        """The id recorded in captures."""
        return self._agent_id

    @property
    def model(self) -> str:
        return ""


__all__ = ["SingleShotAgent"]
