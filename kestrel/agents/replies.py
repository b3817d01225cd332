"""The replies agent: plays raw replies from a file, offline, through the authoring loop.

The file holds one reply per block, blocks separated by a line `---`; each call takes the next
block, whatever the ordinal, so a file can script view requests, invalid replies, repairs and
plans to try the loop, profiles and prompts without a model. Usage is the token count of the
reply text (`kestrel.frame.text.estimate_tokens`, deterministic). A file that runs out raises,
so the ordinal stands down fail-closed with that reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kestrel.frame.text import estimate_tokens
from kestrel.session.protocol import AgentReply, AuthorRequest, Usage

SEPARATOR = "---"


class RepliesError(ValueError):
    """The replies file cannot be read or holds no reply."""


def split_replies(text: str) -> tuple[str, ...]:
    """The blocks of `text` between lines that are exactly `---` (surrounding spaces ignored)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == SEPARATOR:
            blocks.append([])
        else:
            blocks[-1].append(line)
    return tuple("\n".join(b).strip() for b in blocks)


class RepliesAgent:
    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, replies: tuple[str, ...], *, name: str = "replies", source: str = "<replies>") -> None:
        if not replies or not any(replies):
            raise RepliesError(f"{source}: holds no reply (one reply per block, blocks separated by a line ---)")
        self.replies = replies
        self.source = source
        self._name = name
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | Path) -> RepliesAgent:
        p = Path(path)
        try:
            text = p.read_text("utf-8")
        except OSError as exc:
            raise RepliesError(f"cannot read replies file {str(path)!r}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise RepliesError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        return cls(split_replies(text), name=p.stem, source=str(path))

    @property
    def agent_id(self) -> str:
        return f"replies:{self._name}"

    @property
    def model(self) -> str:
        return "replies"

    def author(self, request: AuthorRequest) -> AgentReply:
        if self.calls >= len(self.replies):
            raise RepliesError(f"{self.source}: no reply left (all {len(self.replies)} played)")
        text = self.replies[self.calls]
        self.calls += 1
        return AgentReply(text, Usage(output=estimate_tokens(text)))


__all__ = ["RepliesAgent", "RepliesError", "SEPARATOR", "split_replies"]
