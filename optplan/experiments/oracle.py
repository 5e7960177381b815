"""The oracle of a run: the true model's optimal solution under the run's criterion, solved
once before the loop so that regret is exact (see :mod:`.run`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..agents import env_model
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..problems.criteria import planning_problem, resolve_criterion
from ..result import PlanResult

__all__ = ["Oracle", "solve_oracle", "true_model", "OPTIMAL_ACTION_RTOL"]

#: An action counts as optimal (for :attr:`Trace.optimal_rate`) when its Q-value is within
#: ``OPTIMAL_ACTION_RTOL * (1 + max |Q|)`` of the best one: solver round-off, not a real gap.
OPTIMAL_ACTION_RTOL = 1e-9

_WHAT = {
    "finite_horizon": "finite-horizon problem",
    "discounted": "discounted problem",
    "average": "average-reward problem",
}


@dataclass(frozen=True, eq=False)
class Oracle:
    """The optimal solution a run is scored against.

    Attributes
    ----------
    criterion : str
    result : PlanResult
        The planner's solution (``policy``, ``q`` ...).
    q, vstar : ndarray
        Optimal action values (average reward: ``r + P h*``) and ``vstar = max_a q``, so
        that optimal actions have gap 0 bit for bit.
    is_optimal : ndarray of bool
        Actions within round-off of the best (:data:`OPTIMAL_ACTION_RTOL`).
    optimal_value : float
        ``g*`` (average), ``initial @ V*`` (discounted), ``initial @ V*_0`` (finite horizon).
    """

    criterion: str
    result: PlanResult
    q: np.ndarray
    vstar: np.ndarray
    is_optimal: np.ndarray
    optimal_value: float


def true_model(env) -> TabularMDP | FiniteHorizonMDP:
    """The model an environment exposes as ``env.unwrapped.mdp`` (or ``env.mdp``); a toy-text
    environment's table converted by :func:`~optplan.bridges.from_gymnasium` with
    ``terminal="restart"``; a model itself. The same as
    :func:`optplan.agents.env_model`, which agents' builders read.
    """
    return env_model(env)


def solve_oracle(mdp, criterion: str | None = None) -> Oracle:
    """Solve ``mdp`` for ``criterion`` (default: the model's own) by the fast path.

    Raises
    ------
    ValueError
        If ``criterion`` does not fit the model.
    RuntimeError
        If the planner reports no solution (e.g. a multichain model has no scalar gain).
    """
    criterion = resolve_criterion(mdp, criterion)
    res = planning_problem(mdp, criterion).solve()
    if not res.success:
        raise RuntimeError(
            f"cannot score the run: solving the {_WHAT[criterion]} of the true model gave "
            f"status {res.status!r}: {res.message}"
        )
    q = np.asarray(res.q, dtype=float)
    vstar = q.max(axis=-1)
    if criterion == "finite_horizon":
        optimal_value = float(mdp.initial @ vstar[0])
    elif criterion == "discounted":
        optimal_value = float(mdp.initial @ vstar)
    else:
        optimal_value = float(res.gain)
    scale = 1.0 + float(np.abs(q[np.isfinite(q)]).max())
    # Near-optimal within round-off; the Q-values of the average problem are r + P h.
    is_optimal = q >= vstar[..., None] - OPTIMAL_ACTION_RTOL * scale
    return Oracle(criterion, res, q, vstar, is_optimal, optimal_value)
