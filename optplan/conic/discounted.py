"""Conic path of ``DiscountedPlanning``: the primal LP, occupancies from its dual."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import backup, masked
from ..result import PlanResult
from ._common import admissible_pairs, bellman_rows, planning_result, run_formulated, scatter


def formulate(problem) -> cp.Problem:
    """``min w @ V  s.t.  (E - gamma P) V >= r`` over the admissible pairs (constraint 0); the
    constraint matrix is a ``scipy.sparse`` constant built from ``P``'s nonzeros (dense or
    sparse model alike)."""
    mdp = problem.mdp
    A, r, _ = bellman_rows(mdp.P_rows, mdp.R, mdp.action_mask, mdp.discount)
    V = cp.Variable(mdp.n_states, name="V")
    return cp.Problem(cp.Minimize(problem.weights @ V), [A @ V >= r])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    mdp = problem.mdp
    why = "every discounted LP is feasible and bounded"
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    V = prob.var_dict["V"].value
    y = np.clip(prob.constraints[0].dual_value, 0.0, None)
    occupancy = scatter((1.0 - mdp.discount) * y, admissible_pairs(mdp.action_mask), mdp.R.shape)
    q = masked(backup(mdp.P_rows, mdp.R, V, mdp.discount), mdp.action_mask)
    # full-support weights put mass on every state, so the dual names an action everywhere
    policy = occupancy.argmax(axis=1)
    residual = float(np.max(np.abs(q.max(axis=1) - V)))
    result = result.checked(residual, 1.0 + float(np.abs(V).max()), "Bellman residual")
    return planning_result(
        result, float(mdp.initial @ V), V, occupancy, q=q, policy=policy, occupancy=occupancy
    )
