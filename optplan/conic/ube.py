"""Conic path of ``UncertaintyBellman``: the LP ``min w.u s.t. (I - gamma^2 Pbar_pi) u >= nu``,
sparse, the occupancy ``y`` from its dual."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..result import PlanResult
from ._common import conic_result, run_formulated


def bellman_operator(problem) -> sp.csr_matrix:
    """Sparse ``I - gamma^2 Pbar_pi`` on the flattened pairs (C order over ``[l,] s, a``):
    ``(Pbar_pi u)[s, a] = sum_s' Pbar[s, a, s'] sum_a' pi[s', a'] u[s', a']``; in the layered
    form each layer's block points at the next layer's pairs. Built from the CSR rows of a
    sparse ``mean_transitions`` as they are (a dense one is converted)."""
    pi = problem.policy
    g2 = problem.discount**2
    if not problem.layered:
        S, A = problem.local.shape
        Pf = _csr(problem.transition_rows)
        Pi = _policy_rows(pi)  # (S, S*A): v = Pi @ u
        return (sp.identity(S * A, format="csr") - g2 * (Pf @ Pi)).tocsr()
    L, S, A = problem.local.shape
    blocks = [[None] * L for _ in range(L)]
    for l in range(L):  # loop over layers only
        blocks[l][l] = sp.identity(S * A, format="csr")
        if l + 1 < L:
            Pf = _csr(problem.layer_transitions(l))
            blocks[l][l + 1] = -g2 * (Pf @ _policy_rows(pi[l + 1]))
    return sp.bmat(blocks, format="csr")


def _csr(rows) -> sp.csr_matrix:
    return rows if sp.issparse(rows) else sp.csr_matrix(rows)


def _policy_rows(pi: np.ndarray) -> sp.csr_matrix:
    """Sparse ``Pi[s, s*A + a] = pi[s, a]``: averages pair values into state values."""
    S, A = pi.shape
    rows = np.repeat(np.arange(S), A)
    return sp.csr_matrix((pi.reshape(-1), (rows, np.arange(S * A))), shape=(S, S * A))


def formulate(problem) -> cp.Problem:
    """``min w @ u  s.t.  (I - gamma^2 Pbar_pi) u >= nu`` (constraint 0), ``u`` flattened."""
    n = problem.local.size
    u = cp.Variable(n, name="u")
    M = bellman_operator(problem)
    constraint = M @ u >= problem.local.reshape(-1)
    return cp.Problem(cp.Minimize(problem.weights.reshape(-1) @ u), [constraint])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    why = "the fixed point is feasible and every feasible u lies above it (w > 0)"
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    shape = problem.local.shape
    u = prob.var_dict["u"].value.reshape(shape)
    y = np.asarray(prob.constraints[0].dual_value, dtype=float).reshape(shape)
    scale_u = 1.0 + float(np.abs(u).max())
    result = result.checked(problem.residual(u), scale_u, "fixed-point residual")
    result = result.checked(
        problem.dual_residual(y), 1.0 + float(np.abs(y).max()), "dual fixed-point residual"
    )
    fields = {}
    if not problem.layered:
        fields["values"] = np.sum(problem.policy * u, axis=-1)
    return conic_result(result, value=float(prob.solution.opt_val), x=u, multiplier=y, **fields)
