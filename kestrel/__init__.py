"""Kestrel: a typed, token-efficient language and runtime for agentic trading."""

from kestrel._interrupt import install_if_program

install_if_program()  # the `kestrel` program only: Ctrl-C exits 130 with one line (see _interrupt)

__version__ = "0.1.0"

__all__ = ["__version__"]
