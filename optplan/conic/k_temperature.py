r"""Conic path of ``KLearningTemperature``: problem (11) jointly in ``(tau, K)``.

With ``T[l, s] >= tau log sum_a exp(K[l, s, a] / tau)`` written as the perspective of
log-sum-exp, ``u[l, s, a] >= tau exp((K[l, s, a] - T[l, s]) / tau)`` (one exponential cone per
pair, ``(K - T, tau, u) in K_exp``) and ``sum_a u[l, s, a] <= tau``, and the bonus ``c / tau``
through ``w >= 1 / tau`` (a second-order cone, ``cp.inv_pos``):

    minimize    rho . T[0]
    subject to  K[l, s, a] >= mu[l, s, a] + c[l, s, a] w + P[l, s, a] . T[l + 1]   (T[L] = 0)
                (K - T, tau, u) in K_exp,  sum_a u <= tau,  w >= 1 / tau.

Every constraint is a relaxation of an equality of the recursion that is tight at the optimum
(``P, c >= 0``), so the optimal value is that of problem (11). The duals of the Bellman rows
are the occupancy ``lambda`` of Appendix A.4.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..result import PlanResult
from ..soft import boltzmann_policy, layered_occupancy
from ._common import conic_result, no_solution, run


def formulate(problem) -> cp.Problem:
    R, P, rho = problem.mean_rewards, problem.mean_transitions, problem.initial
    L, S, A = R.shape
    n_pairs, n_states = L * S * A, L * S
    c = problem.bonus_numerators().ravel()
    rows = np.arange(n_pairs)
    state_of_pair = rows // A  # flat (l, s) of each flat (l, s, a), C order
    # E: pair -> its own state's T; G: pair -> P[l, s, a] . T[l + 1] (zero at the last layer).
    E = sp.csr_matrix((np.ones(n_pairs), (rows, state_of_pair)), shape=(n_pairs, n_states))
    layer = state_of_pair // S
    P_flat = P.reshape(n_pairs, S)
    keep = layer < L - 1
    r_idx = np.repeat(rows[keep], S)
    c_idx = ((layer[keep] + 1) * S)[:, None] + np.arange(S)[None, :]
    G = sp.csr_matrix((P_flat[keep].ravel(), (r_idx, c_idx.ravel())), shape=(n_pairs, n_states))
    G.eliminate_zeros()

    tau = cp.Variable(name="tau", nonneg=True)
    w = cp.Variable(name="w")
    K = cp.Variable(n_pairs, name="K")
    T = cp.Variable(n_states, name="T")
    u = cp.Variable(n_pairs, name="u")
    constraints = [
        K >= R.ravel() + c * w + G @ T,  # the Bellman inequalities (duals: lambda)
        cp.ExpCone(K - E @ T, tau * np.ones(n_pairs), u),
        E.T @ u <= tau,
        cp.inv_pos(tau) <= w,
    ]
    return cp.Problem(cp.Minimize(rho @ T[:S]), constraints)


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    R, P, rho = problem.mean_rewards, problem.mean_transitions, problem.initial
    L, S, A = R.shape
    prob = formulate(problem)
    result = run(prob, solver, solver_options)
    failed = no_solution(result)
    if failed:
        return failed
    tau = float(prob.var_dict["tau"].value)
    K = prob.var_dict["K"].value.reshape(L, S, A)
    V = prob.var_dict["T"].value.reshape(L, S)
    lam = np.clip(prob.constraints[0].dual_value, 0.0, None).reshape(L, S, A)
    if tau > 0:
        pi = boltzmann_policy(K, tau)
        occ = layered_occupancy(pi, P, rho)
    else:
        pi, occ = None, lam
    return conic_result(
        result,
        value=float(prob.value),
        x=tau,
        multiplier=lam,
        values=V,
        q=K,
        policy=pi,
        occupancy=occ,
        info={"tau": tau},
    )
