"""Conic path of ``OptimisticPlanning``: the optimistic MDP as one LP (L1 balls) or one
exponential-cone program (KL balls), the inner maximum replaced by its dual minimum."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..result import PlanResult
from ._common import NOT_FEASIBLE_OR_BOUNDED, admissible_pairs, conic_result, no_solution, run


def _inner_dual(ball: str, P: np.ndarray, d: np.ndarray, V):
    """CVXPY expressions ``sigma[k] >= max_{q in B(P[k], d[k])} q . V`` (equal at the optimum
    over the auxiliary variables) for ``m`` pairs, with ``d > 0``; also the constraints they
    need."""
    m, S = P.shape
    if ball == "l1":
        mu = cp.Variable(m, name="mu")
        W = cp.Variable((m, S), name="w", nonneg=True)
        kappa = cp.Variable(m, name="kappa", nonneg=True)
        ones_m, ones_S = np.ones((m, 1)), np.ones((1, S))
        Z = (
            ones_m @ cp.reshape(V, (1, S), order="C")
            - cp.reshape(mu, (m, 1), order="C") @ ones_S
            + W
        )
        K = cp.reshape(kappa, (m, 1), order="C") @ ones_S
        cons = [Z <= K, -Z <= K]
        sigma = P @ V + cp.sum(cp.multiply(P, W), axis=1) + cp.multiply(d, kappa)
        return sigma, cons
    lam = cp.Variable(m, name="lam", nonneg=True)
    eta = cp.Variable(m, name="eta")
    k_idx, x_idx = np.nonzero(P > 0)
    sum_rows = sp.csr_matrix(
        (P[k_idx, x_idx], (k_idx, np.arange(k_idx.size))), shape=(m, k_idx.size)
    )
    rel = cp.rel_entr(lam[k_idx], eta[k_idx] - V[x_idx])
    sigma = eta + cp.multiply(d, lam) - lam + sum_rows @ rel
    k0, x0 = np.nonzero(P == 0)
    cons = [eta[k0] >= V[x0]] if k0.size else []
    return sigma, cons


def formulate(problem) -> cp.Problem:
    """Discounted: ``min mean(V) s.t. V(s) >= r + beta + gamma sigma_k(V)``; average:
    ``min g s.t. g + h(s) >= r + beta + sigma_k(h)``, ``h[0] = 0``. Constraint 0 holds the
    Bellman inequalities of the pairs with a ball (``d > 0``), constraint 1 those of the pairs
    with known transitions (``d = 0``), when each kind exists."""
    S = problem.n_states
    s_idx, a_idx = admissible_pairs(problem.action_mask)
    P = problem.p_hat[s_idx, a_idx]
    c = problem.r_hat[s_idx, a_idx] + problem.reward_radius[s_idx, a_idx]
    d = problem.radius[s_idx, a_idx]
    average = problem.criterion == "average"
    V = cp.Variable(S, name="h" if average else "V")
    gamma = 1.0 if average else problem.discount
    lhs = V[s_idx]
    if average:
        g = cp.Variable(name="g")
        lhs = lhs + g
    ball, known = d > 0, d == 0
    constraints, extra = [], []
    if ball.any():
        sigma, extra = _inner_dual(problem.ball, P[ball], d[ball], V)
        constraints.append(lhs[np.flatnonzero(ball)] >= c[ball] + gamma * sigma)
    if known.any():
        constraints.append(lhs[np.flatnonzero(known)] >= c[known] + gamma * (P[known] @ V))
    constraints += extra
    if average:
        constraints.append(V[0] == 0)
        return cp.Problem(cp.Minimize(g), constraints)
    return cp.Problem(cp.Minimize(cp.sum(V) / S), constraints)


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    prob = formulate(problem)
    result = run(prob, solver, solver_options).cannot_be(
        NOT_FEASIBLE_OR_BOUNDED,
        "the optimistic fixed point is feasible and bounded below"
        if problem.criterion == "discounted"
        else "g = max r + beta with h = 0 is feasible and g >= min r",
    )
    failed = no_solution(result)
    if failed:
        return failed
    average = problem.criterion == "average"
    V = prob.var_dict["h" if average else "V"].value
    fields = dict(values=V)
    if average:
        g = float(prob.var_dict["g"].value)
        fields.update(gain=g, bias=V, value=g, x=V)
    else:
        fields.update(value=float(np.mean(V)), x=V)
    return conic_result(result, **fields)
