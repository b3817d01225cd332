"""Benchmarks: each script prints one JSON line of figures (`--quick` for `make bench`).
A package only so that `mypy` names them `bench.*` (`bench/mcp.py` must not shadow the `mcp`
SDK); run them as scripts: `python bench/NAME.py`."""
