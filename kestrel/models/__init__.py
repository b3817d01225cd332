"""Model adapters: language models as Kestrel agents (the I/O edge of the core).

`card` (the generated system prompt) is pure. The adapters (`openai_chat`, `anthropic_messages`)
are blocking agents that import their provider's SDK lazily, on first use, so importing
`kestrel.models` never imports an SDK. How they make their calls is a `callpolicy.CallPolicy`:
retries (`retry`), a client-side rate limiter (`limiter`), spending caps (`spending`) and a
reply cache (`replycache`); `errors` says how a call fails.
"""

from kestrel.models.card import language_card

__all__ = ["language_card"]
