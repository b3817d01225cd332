"""Kestrel: a typed, token-efficient language and runtime for agentic trading."""

__version__ = "0.1.0"

__all__ = ["__version__"]
