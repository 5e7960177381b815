"""Fast path of ``DiscountedPlanning``: policy iteration or value iteration (vectorized)."""

from __future__ import annotations

import time

import numpy as np

from ..dp import (
    backup,
    discounted_occupancy,
    greedy,
    masked,
    policy_iteration,
    policy_model,
    value_iteration,
)
from ..result import PlanResult
from ._options import check_algorithm, check_tol_iter
from ._result import fast_result

ALGORITHMS = ("policy_iteration", "value_iteration")


def solve(
    problem, algorithm: str = "policy_iteration", tol: float = 1e-10, max_iter: int | None = None
) -> PlanResult:
    """Solve a discounted MDP.

    Parameters
    ----------
    algorithm : {"policy_iteration", "value_iteration"}
        Howard policy iteration (exact; terminates when the greedy policy repeats) or value
        iteration stopped when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which
        guarantees ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1).
    tol : float
        Value-iteration accuracy; for policy iteration the tie tolerance is ``1e-12``.
    max_iter : int, optional
        Default 1,000 (policy iteration) or 1,000,000 (value iteration).
    """
    check_algorithm(algorithm, ALGORITHMS)
    if max_iter is None:
        max_iter = 1_000 if algorithm == "policy_iteration" else 1_000_000
    check_tol_iter(tol, max_iter)
    mdp = problem.mdp
    P, R, mask, gamma = mdp.P, mdp.R, mdp.action_mask, mdp.discount
    start = time.perf_counter()
    if algorithm == "policy_iteration":
        status, message, policy, V, Q, _, it = policy_iteration(P, R, mask, gamma, None, max_iter)
    else:
        status, message, V, it = value_iteration(P, R, mask, gamma, tol, max_iter)
        Q = backup(P, R, V, gamma)
        policy = greedy(masked(Q, mask))
    P_pi, _ = policy_model(P, R, policy)
    d = discounted_occupancy(P_pi, problem.weights, gamma)
    occupancy = np.zeros_like(R)
    occupancy[np.arange(mdp.n_states), policy] = d
    return fast_result(
        algorithm,
        start,
        it,
        value=float(mdp.initial @ V),
        x=V,
        multiplier=occupancy,
        status=status,
        message=message,
        values=V,
        q=masked(Q, mask),
        policy=policy,
        occupancy=occupancy,
    )
