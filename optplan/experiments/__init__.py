"""Experiments: one agent in one environment, scored exactly against the true model.

- :func:`run` / :class:`Trace`: the agent-environment loop and its record (:mod:`.run`);
- :mod:`.engines`: the compiled runs that take over the loop where they cover it;
- :mod:`.metrics`: the regret metrics; :mod:`.oracle`: the true model solved;
- :mod:`.stats`: confidence intervals over seeds and the per-(agent, env) summary table.

Many runs from a file are :mod:`optplan.sweeps`; their figures :mod:`optplan.plots`.
(:mod:`.stats` is not imported here: it loads scipy.stats.)
"""

from . import metrics
from .run import Trace, run

__all__ = ["Trace", "run", "metrics"]
