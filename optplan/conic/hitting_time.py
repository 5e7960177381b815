"""Conic path of ``HittingTimes``: one LP for every target's stochastic shortest path."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..dp import masked
from ..result import PlanResult
from ._common import conic_result, run_formulated


def formulate(problem) -> cp.Problem:
    """``max sum T  s.t.  T[t, s] <= 1 + P(s, a) T[t]`` for every target ``t``, state ``s``
    that reaches ``t`` (``s != t``) and action ``a`` that stays among those states; variables
    only for those ``(t, s)`` (``T[t, t] = 0`` and the rest are fixed). The LP's optimum is
    the smallest expected time under every proper policy (Bertsekas and Tsitsiklis 1991)."""
    mdp = problem.mdp
    S = mdp.n_states
    reach, stays = problem.reach, problem.stays()
    free = reach & ~np.eye(S, dtype=bool)
    col = np.full((S, S), -1)
    col[free] = np.arange(free.sum())
    t_idx, s_idx, a_idx = np.nonzero(stays & free[:, :, None])
    rows = np.arange(t_idx.size)
    A = mdp.n_actions
    picked = mdp.P_rows[s_idx * A + a_idx]  # (K, S), sparse for a sparse model
    picked = picked.tocoo() if sp.issparse(picked) else sp.coo_matrix(picked)
    k, nxt, mass = picked.row, picked.col, picked.data
    into = free[t_idx[k], nxt] & (mass != 0)  # mass into the target (or fixed cells) drops
    k, nxt, mass = k[into], nxt[into], mass[into]
    M = sp.csr_matrix(
        (np.ones(rows.size), (rows, col[t_idx, s_idx])), shape=(rows.size, free.sum())
    ) - sp.csr_matrix((mass, (k, col[t_idx[k], nxt])), shape=(rows.size, free.sum()))
    T = cp.Variable(int(free.sum()), name="times")
    return cp.Problem(cp.Maximize(cp.sum(T)), [M @ T <= 1.0])


def _weighted_gaps(mdp, finite: np.ndarray) -> np.ndarray:
    """``out[t, s, a] = sum_j P(s, a, j) (T[t, s] - T[t, j])`` over the stored entries of
    ``P`` (dense, or the sparse rows without a dense copy)."""
    S, A = mdp.n_states, mdp.n_actions
    if not mdp.sparse:
        gaps = finite[:, :, None] - finite[:, None, :]  # (t, s, j)
        return np.einsum("saj,tsj->tsa", mdp.P, gaps)
    coo = mdp.P_rows.tocoo()
    r, j, p = coo.row, coo.col, coo.data
    weighted = (finite[:, r // A] - finite[:, j]) * p  # (t, nnz)
    collect = sp.csr_matrix((np.ones(r.size), (np.arange(r.size), r)), shape=(r.size, S * A))
    return np.asarray(collect.T @ weighted.T).T.reshape(S, S, A)


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    """The LP, then the times scattered back (``inf`` where ``t`` is unreachable) and the
    fastest action read greedily from them; the answer is checked by its Bellman residual."""
    mdp = problem.mdp
    S = mdp.n_states
    why = "T = 0 is feasible and a proper policy bounds T"
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    reach, stays = problem.reach, problem.stays()
    free = reach & ~np.eye(S, dtype=bool)
    T = np.where(reach, 0.0, np.inf)
    T[free] = prob.var_dict["times"].value
    finite = np.where(np.isfinite(T), T, 0.0)
    # q - T = 1 - sum_j P(s, a, j) (T[t, s] - T[t, j]): the residual from differences, which
    # keep their digits where 1 + P T - T rounds at the last digit of T (T = 5e11: 1e-4)
    slack = 1.0 - _weighted_gaps(mdp, finite)
    slack = -masked(-slack, stays)
    policy = np.where(free, slack.argmin(axis=2), -1)
    residual = float(np.abs(slack.min(axis=2)[free]).max(initial=0.0))
    # a residual r moves T by up to max(T) * r ((I - P_NN)^{-1} has row sums T), so T is
    # right to rtol relative only if r is within the tolerance on the scale 1; on the scale
    # max(T), as before, Clarabel's T of 5.0001e11 for an exact 5e11 passed (op.verify)
    result = result.checked(residual, 1.0, "Bellman residual (on the scale 1: max T amplifies it)")
    off = ~np.eye(S, dtype=bool)
    return conic_result(
        result,
        value=float(T[off].max()) if S > 1 else 0.0,
        x=T,
        values=T,
        policy=policy,
        info={"bellman_residual": residual},
    )
