"""Experiments: the run loop, regret metrics, declarative sweeps, backends, results, plots.

- :func:`run` / :class:`Trace`: one agent in one environment, scored exactly (:mod:`.metrics`);
- :mod:`.registry`: the named agents and environments sweeps refer to;
- :func:`load_sweep` / :class:`Sweep`: sweep files (``models/sweeps/*.toml``);
- :func:`run_sweep`: local (joblib) or Ray execution into a resumable :class:`ResultStore`;
- :func:`load_results` / :class:`Results`: read a result directory back;
- :mod:`.stats`: confidence intervals over seeds and the per-(agent, env) summary table;
- :mod:`.plots`: regret, scaling and heatmap figures (matplotlib, optional).

(Neither is imported here: :mod:`.stats` loads scipy.stats, :mod:`.plots` draws with matplotlib.)
"""

from . import metrics, registry
from .execute import BACKENDS, SweepReport, execute_task, run_sweep
from .run import Trace, run
from .store import Results, ResultStore, StoreMismatch, load_results
from .sweep import Sweep, SweepError, Task, load_sweep, single_sweep, sweep_from_dict

__all__ = [
    "Trace",
    "run",
    "metrics",
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
