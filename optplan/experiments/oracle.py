"""The oracle of a run: the true model's optimal solution under the run's criterion, solved
once before the loop so that regret is exact (see :mod:`.run`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from .._checks import OptplanTypeError
from ..bridges import from_gymnasium, table_of
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


#: Toy-text environments converted once (agents' builders and the oracle ask for the model).
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def true_model(env) -> TabularMDP | FiniteHorizonMDP:
    """The model an environment exposes as ``env.unwrapped.mdp`` (or ``env.mdp``).

    An environment without one but with a toy-text transition table ``env.unwrapped.P``
    (Gymnasium's FrozenLake, Taxi, CliffWalking, or a user environment of that form) is
    converted by :func:`~optplan.bridges.from_gymnasium` with ``terminal="restart"``: the
    continuing view of a run loop that resets the environment when an episode terminates.
    """
    inner = getattr(env, "unwrapped", env)
    mdp = getattr(inner, "mdp", None)
    if mdp is None and table_of(env) is not None:
        try:
            mdp = _CONVERTED.get(inner)
        except TypeError:  # not weakly referenceable: convert each time
            return from_gymnasium(env, terminal="restart")
        if mdp is None:
            mdp = _CONVERTED[inner] = from_gymnasium(env, terminal="restart")
        return mdp
    if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
        raise OptplanTypeError(
            f"env must expose its true model as .mdp (an optplan environment) or a toy-text "
            f"transition table as .unwrapped.P (dict P[s][a] = [(prob, next_state, reward, "
            f"terminated), ...]); got {type(env).__name__} wrapping {type(inner).__name__}"
        )
    return mdp


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
