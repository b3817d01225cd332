"""Model adapters: language models as Kestrel agents (the I/O edge of the core).

`card` (the generated system prompt) is pure. The adapters (`openai_chat`, `anthropic_messages`)
are blocking agents that import their provider's SDK lazily, on first use, so importing
`kestrel.models` never imports an SDK.
"""

from kestrel.models.card import language_card

__all__ = ["language_card"]
