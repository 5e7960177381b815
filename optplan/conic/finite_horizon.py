"""Conic path of ``FiniteHorizonPlanning``: the LP over all layers at once."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..dp import backup, forward_occupancy, greedy, layer_block, masked
from ..result import PlanResult
from ._common import admissible_pairs, bellman_matrix, planning_result, run_formulated, scatter


def formulate(problem) -> cp.Problem:
    """``min sum V  s.t.  V[l, s] >= R[l, s, a] + P[l, s, a] @ V[l + 1]`` (``V[L] = 0``); the
    constraint matrix is a ``scipy.sparse`` constant built from ``P``'s nonzeros (a sparse
    model's CSR rows gathered, never densified)."""
    mdp = problem.mdp
    L, S, A_ = mdp.R.shape
    l_idx, s_idx, a_idx = admissible_pairs(mdp.action_mask)
    keep = (l_idx < L - 1).astype(float)  # V[L] = 0: the last layer's rows have no successor
    rows = mdp.P_rows[(l_idx * S + s_idx) * A_ + a_idx]
    if sp.issparse(rows):
        P_rows = (sp.diags(keep) @ rows).tocsr()
        P_rows.eliminate_zeros()
    else:
        P_rows = rows * keep[:, None]
    A = bellman_matrix(P_rows, l_idx * S + s_idx, L * S, 1.0, next_offset=(l_idx + 1) * S)
    V = cp.Variable(L * S, name="V")
    bellman = A @ V >= mdp.R[l_idx, s_idx, a_idx]
    return cp.Problem(cp.Minimize(cp.sum(V)), [bellman])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    mdp = problem.mdp
    L, S, _ = mdp.R.shape
    why = "every finite-horizon LP is feasible and bounded"
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    V = prob.var_dict["V"].value.reshape(L, S)
    V_next = np.vstack([V[1:], np.zeros((1, S))])
    q = np.stack(
        [
            masked(
                backup(layer_block(mdp.P, l, S, mdp.n_actions), mdp.R[l], V_next[l]),
                mdp.action_mask[l],
            )
            for l in range(L)
        ]
    )
    policy = greedy(q)
    dual = scatter(
        np.clip(prob.constraints[0].dual_value, 0.0, None),
        admissible_pairs(mdp.action_mask),
        mdp.R.shape,
    )
    residual = float(np.max(np.abs(q.max(axis=-1) - V)))
    result = result.checked(residual, 1.0 + float(np.abs(V).max()), "Bellman residual")
    occupancy = forward_occupancy(mdp.P, mdp.initial, policy)
    return planning_result(
        result, float(mdp.initial @ V[0]), V, dual, q=q, policy=policy, occupancy=occupancy
    )
