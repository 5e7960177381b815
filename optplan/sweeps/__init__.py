"""Sweeps: agents x environments x parameter grids x seeds, run into a resumable store.

- :mod:`.registry`: the named agents and environments sweeps refer to (and user components);
- :func:`load_sweep` / :class:`Sweep`: sweep files (``models/sweeps/*.toml``);
- :func:`run_sweep`: local (joblib) or Ray execution into a resumable :class:`ResultStore`;
- :func:`load_results` / :class:`Results`: read a result directory back.
"""

from . import registry
from .execute import BACKENDS, SweepReport, execute_task, run_sweep
from .results import Results, load_results
from .store import ResultStore, StoreMismatch
from .sweep import Sweep, SweepError, Task, load_sweep, single_sweep, sweep_from_dict

__all__ = [
    "registry",
    "Sweep",
    "SweepError",
    "Task",
    "load_sweep",
    "single_sweep",
    "sweep_from_dict",
    "run_sweep",
    "execute_task",
    "SweepReport",
    "BACKENDS",
    "ResultStore",
    "Results",
    "StoreMismatch",
    "load_results",
]
