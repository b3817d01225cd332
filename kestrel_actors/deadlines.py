"""`AskDeadlines`: one timer task per system times out every pending `ask`
(see `kestrel_actors._core.deadlines`)."""

from kestrel_actors._core.deadlines import AskDeadlines

__all__ = ["AskDeadlines"]
