"""Built-in agents. Each implements `kestrel.session.protocol.Agent`: `author(request) ->
AgentReply` (raw text + usage), `iterative` (whether it takes part in the authoring loop),
`blocking` (whether `author` may block on I/O), `agent_id` and `model`.

- `BaselineAgent`: deterministic rule-based opening-range breakout (single-shot);
- `FixedAgent`: arms one given `.kes` plan at each session's OPEN, then passes (single-shot);
- `RecordedAgent`: replays captured turns (single-shot);
- `ScriptedAgent`: plays scripted raw replies, for tests (iterative);
- `RepliesAgent`: plays raw replies from a file (`replies:FILE`, blocks separated by `---`).
Model adapters (`kestrel.models`: OpenAI-compatible, Anthropic) plug in through the same
protocol: the model's text with normalized `Usage`, `iterative = True`, `blocking = True`.
"""

from kestrel.agents.base import SingleShotAgent
from kestrel.agents.baseline import BaselineAgent, BaselineConfig
from kestrel.agents.fixed import FixedAgent, PlanFileError
from kestrel.agents.recorded import RecordedAgent, ReplayError, turn_text
from kestrel.agents.replies import RepliesAgent, RepliesError
from kestrel.agents.scripted import Raise, ScriptedAgent, ScriptError

__all__ = [
    "BaselineAgent",
    "BaselineConfig",
    "FixedAgent",
    "PlanFileError",
    "Raise",
    "RecordedAgent",
    "RepliesAgent",
    "RepliesError",
    "ReplayError",
    "ScriptError",
    "ScriptedAgent",
    "SingleShotAgent",
    "turn_text",
]
