"""`AskDeadlines`: one timer task per system times out every pending `ask`
(see `actors._core.deadlines`)."""

from actors._core.deadlines import AskDeadlines

__all__ = ["AskDeadlines"]
