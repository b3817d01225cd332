"""Sweeps: agents x profiles x data files x days, each run keyed by its spec and its data's
SHA-256, executed serially, on a process pool or on a Dask cluster behind one executor seam,
resumable, with a results table. Pure: the executor is injected by the caller."""

from kestrel.sweep.results import COLUMNS, stored_rows, write_tables
from kestrel.sweep.run import SweepOutcome, plan_tasks, run_sweep
from kestrel.sweep.spec import Grid, GridFile, SweepRun, SweepError, expand, load_grid_file, run_key
from kestrel.sweep.worker import RunTask, execute

__all__ = [
    "COLUMNS",
    "Grid",
    "GridFile",
    "SweepRun",
    "RunTask",
    "SweepError",
    "SweepOutcome",
    "execute",
    "expand",
    "load_grid_file",
    "plan_tasks",
    "run_key",
    "run_sweep",
    "stored_rows",
    "write_tables",
]
