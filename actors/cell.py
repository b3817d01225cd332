"""The runtime side of one actor: mailbox, task, supervision (see `actors._core.cell`)."""

from actors._core.cell import Cell, CellHost, HandlerFailed

__all__ = ["Cell", "CellHost", "HandlerFailed"]
