"""Conic path of ``FiniteHorizonPlanning``: the LP over all layers at once."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import backup, forward_occupancy, greedy, masked
from ..result import PlanResult
from ._common import (
    NOT_FEASIBLE_OR_BOUNDED,
    admissible_pairs,
    bellman_matrix,
    conic_result,
    no_solution,
    run,
    scatter,
)


def formulate(problem) -> cp.Problem:
    """``min sum V  s.t.  V[l, s] >= R[l, s, a] + P[l, s, a] @ V[l + 1]`` (``V[L] = 0``)."""
    mdp = problem.mdp
    L, S, _ = mdp.R.shape
    l_idx, s_idx, a_idx = admissible_pairs(mdp.action_mask)
    P_rows = mdp.P[l_idx, s_idx, a_idx] * (l_idx < L - 1)[:, None]  # V[L] = 0
    A = bellman_matrix(P_rows, l_idx * S + s_idx, L * S, 1.0, next_offset=(l_idx + 1) * S)
    V = cp.Variable(L * S, name="V")
    bellman = A @ V >= mdp.R[l_idx, s_idx, a_idx]
    return cp.Problem(cp.Minimize(cp.sum(V)), [bellman])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    mdp = problem.mdp
    L, S, _ = mdp.R.shape
    prob = formulate(problem)
    result = run(prob, solver, solver_options).cannot_be(
        NOT_FEASIBLE_OR_BOUNDED, "every finite-horizon LP is feasible and bounded"
    )
    failed = no_solution(result)
    if failed:
        return failed
    v = prob.var_dict["V"].value
    V = v.reshape(L, S)
    V_next = np.vstack([V[1:], np.zeros((1, S))])
    q = np.stack(
        [masked(backup(mdp.P[l], mdp.R[l], V_next[l]), mdp.action_mask[l]) for l in range(L)]
    )
    policy = greedy(q)
    dual = scatter(
        np.clip(prob.constraints[0].dual_value, 0.0, None),
        admissible_pairs(mdp.action_mask),
        mdp.R.shape,
    )
    residual = float(np.max(np.abs(q.max(axis=-1) - V)))
    result = result.checked(residual, 1.0 + float(np.abs(V).max()), "Bellman residual")
    return conic_result(
        result,
        value=float(mdp.initial @ V[0]),
        x=V,
        multiplier=dual,
        values=V,
        q=q,
        policy=policy,
        occupancy=forward_occupancy(mdp.P, mdp.initial, policy),
    )
