"""The runtime side of one actor: mailbox, task, supervision (see `kestrel_actors._core.cell`)."""

from kestrel_actors._core.cell import Cell, CellHost, HandlerFailed

__all__ = ["Cell", "CellHost", "HandlerFailed"]
