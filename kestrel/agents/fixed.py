"""The fixed agent: arms one given `.kes` plan at each session's OPEN, then passes.

Single-shot: it never enters the iterative authoring loop. The plan is validated when the
agent is made (`FixedAgent(text)` / `from_file(path)` raise `PlanFileError` with the language's
`file:line:col` diagnostics), so a session never starts on a document that is not one valid
PLAN; its text still goes through the runtime's interpretation like any agent's reply.
"""

from __future__ import annotations

from pathlib import Path

from kestrel import lang
from kestrel.agents.base import SingleShotAgent
from kestrel.lang import ast
from kestrel.market.instrument import MAX_LOT_DECIMALS
from kestrel.session.protocol import AgentReply, AuthorRequest


class PlanFileError(ValueError):
    """The plan document cannot be read or is not exactly one valid PLAN."""


def diagnostics_text(source: str, err: lang.LangError) -> str:
    """One `source:line:col: message (expected: ...) (hint: ...)` line per diagnostic."""
    return "\n".join(d.located(source) for d in err.diagnostics)


FINEST_LOT = 10.0**-MAX_LOT_DECIMALS
"""The lot a plan file is checked against: the file names no instrument, so its quantities are
checked against the instrument's lot where the plan is armed (the engine's checker)."""


def parse_plan(text: str, source: str = "<plan>") -> ast.Plan:
    """`text` as one checked PLAN (its quantities any decimal of at most `MAX_LOT_DECIMALS`
    places), or `PlanFileError` saying what is wrong and where."""
    try:
        node = lang.parse(text, lot=FINEST_LOT)
    except lang.LangError as err:
        raise PlanFileError(diagnostics_text(source, err)) from None
    if isinstance(node, ast.Module):
        raise PlanFileError(
            f"{source}: holds {len(node.statements)} statements; a fixed plan file holds exactly one PLAN"
        )
    if not isinstance(node, ast.Plan):
        raise PlanFileError(
            f"{source}: holds a {type(node).__name__.upper()} statement; a fixed plan file holds one PLAN"
        )
    return node


class FixedAgent(SingleShotAgent):
    def __init__(self, text: str, *, name: str = "fixed", source: str | None = None) -> None:
        super().__init__(f"fixed:{name}")
        self.plan = parse_plan(text, source or f"<{name}>")
        self._text = text

    @classmethod
    def from_file(cls, path: str | Path) -> FixedAgent:
        p = Path(path)
        try:
            text = p.read_text("utf-8")
        except OSError as exc:
            raise PlanFileError(f"cannot read plan file {str(path)!r}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise PlanFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        return cls(text, name=p.stem, source=str(path))

    def author(self, request: AuthorRequest) -> AgentReply:
        """The plan at OPEN (each session's engine starts empty), PASS at checkpoints."""
        return AgentReply(text=self._text if request.ordinal == "OPEN" else "PASS")


__all__ = ["FixedAgent", "PlanFileError", "diagnostics_text", "parse_plan"]
